import t from 'tap'
import { parseRedisUrl, redisHosts, redisUrlProblem } from '../../common/redis-topology.js'
import { parseConfig } from '../../config/schema.js'
import { redactUrl, where } from '../../common/service-checks.js'

t.test('one server: redis:// and rediss:// as URL reads them', async (t) => {
  t.match(parseRedisUrl('redis://:pw@10.0.0.5:6380/2'), { kind: 'single', tls: false, password: 'pw' })
  t.match(parseRedisUrl('rediss://u:p%40ss@cache.example:6379'), {
    kind: 'single',
    tls: true,
    username: 'u',
    password: 'p@ss',
  })
  t.same(redisHosts(parseRedisUrl('redis://[::1]:7000')), [{ host: '::1', port: 7000 }])
})

t.test('a Sentinel set: every Sentinel, the master name, the database and the Sentinels own password', async (t) => {
  t.same(
    parseRedisUrl('redis+sentinel://user:p%2Fw@10.0.0.1:26379,10.0.0.2,[fd00::3]:26380/atrium/3?sentinelPassword=s3'),
    {
      kind: 'sentinel',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26379 },
        { host: 'fd00::3', port: 26380 },
      ],
      name: 'atrium',
      db: 3,
      tls: false,
      username: 'user',
      password: 'p/w',
      sentinelUsername: undefined,
      sentinelPassword: 's3',
    },
  )
  t.match(parseRedisUrl('rediss+sentinel://s1:26379/m'), { kind: 'sentinel', tls: true, db: 0, name: 'm' })
})

t.test('passwords with raw / and @, and a Sentinel password with + and ?, read as written', async (t) => {
  t.match(parseRedisUrl('redis+sentinel://:s3cr/et@p@h1:26379/m?sentinelPassword=a%2Bb%3Fc+d'), {
    password: 's3cr/et@p',
    sentinels: [{ host: 'h1', port: 26379 }],
    name: 'm',
    sentinelPassword: 'a+b?c+d',
  })
  const { config } = parseConfig({ REDIS_URL: 'redis+cluster://:ends-with/@h1:6379' })
  t.equal(config.REDIS_URL, 'redis+cluster://:ends-with/@h1:6379', 'kept as written')
})

t.test('a cluster: its seed nodes, database 0 only', async (t) => {
  t.same(parseRedisUrl('redis+cluster://:pw@127.0.0.1:7000,127.0.0.1:7001'), {
    kind: 'cluster',
    nodes: [
      { host: '127.0.0.1', port: 7000 },
      { host: '127.0.0.1', port: 7001 },
    ],
    tls: false,
    username: undefined,
    password: 'pw',
  })
})

t.test('what is wrong is said, without the password', async (t) => {
  const cases: [string, RegExp][] = [
    ['http://x:6379', /must start with redis:\/\/, rediss:\/\//],
    ['redis+sentinel://:secret@h1:26379,h2:26379', /names no master/],
    ['redis+sentinel://:secret@h1:26379/m/x', /database that is not a number/],
    ['redis+cluster://:secret@h1:6379/1', /database 0 only/],
    ['redis+cluster://:secret@h1:99999', /host 1 of 1 has port 99999, out of range/],
    ['redis+cluster://:secret@', /names no cluster node/],
    ['redis+cluster://:secret@h1:6379,h 2', /host 2 of 2 is not host:port/],
    // Written without %XX, a '?' in the password ends the hosts: nothing of it is quoted.
    ['redis+cluster://u:pa?secret@h1', /host 1 of 1 is not host:port/],
  ]
  for (const [url, problem] of cases) {
    const said = redisUrlProblem(url)
    t.match(said, problem, url.replace('secret', '***'))
    t.notMatch(said ?? '', /secret|pa\b/)
  }
  t.equal(redisUrlProblem('redis+cluster://h1:6379,h2:6379'), null)
})

t.test('the config schema takes every form and refuses the others by name', async (t) => {
  for (const url of [
    'redis://h:6379',
    'redis+sentinel://h1:26379,h2:26379/atrium',
    'rediss+cluster://h1:6379,h2:6379',
  ]) {
    const { config, problems } = parseConfig({ REDIS_URL: url })
    t.same(problems, [], url)
    t.equal(config.REDIS_URL, url)
  }
  const { problems } = parseConfig({ REDIS_URL: 'redis+sentinel://:hunter2@h1:26379' })
  t.match(problems, [/^REDIS_URL names no master/])
  t.notMatch(problems.join(' '), /hunter2/)
})

t.test('shown to people, a Sentinel or Cluster URL has neither password, whatever its spelling', async (t) => {
  const url = 'redis+sentinel://u:p@ss/w%2Bd@[fd00::3]:26380,10.0.0.2/atrium/2?sentinelPassword=s%2B3'
  t.equal(redactUrl(url), 'redis+sentinel://u:***@[fd00::3]:26380,10.0.0.2:26379/atrium/2?sentinelPassword=***')
  t.equal(where(url), '[fd00::3]:26380,10.0.0.2:26379')
  t.equal(redactUrl('redis+cluster://h1:7000,h2:7001'), 'redis+cluster://h1:7000,h2:7001')
})
