// DEFAULT_REGION and REGION_STORES: the regions a deployment serves, checked with every problem named
// (never a value: the stores' keys are in it).
import t from 'tap'
import { parseConfig } from '../../config/schema.js'

const store = {
  endpoint: 'https://s3.eu.example.com',
  bucket: 'atrium-eu',
  accessKeyId: 'AKIAEXAMPLE',
  secretAccessKey: 'sEcReT/sEcReT',
}

t.test('a region store is read with its defaults', async (t) => {
  const { config, problems } = parseConfig({
    DEFAULT_REGION: 'us-west',
    REGION_STORES: JSON.stringify({ 'eu-west': store }),
  })
  t.same(problems, [])
  t.equal(config.DEFAULT_REGION, 'us-west')
  t.same(config.REGION_STORES, { 'eu-west': { ...store, region: 'us-east-1', publicEndpoint: '' } })
  t.same(parseConfig({}).config.REGION_STORES, {}, 'none by default')
  t.equal(parseConfig({}).config.DEFAULT_REGION, 'us-east')
})

t.test('every mistake is named, by region and field, and no secret is shown', async (t) => {
  const { problems } = parseConfig({
    DEFAULT_REGION: 'eu-west',
    REGION_STORES: JSON.stringify({
      'eu-west': store,
      mars: store,
      'us-west': { endpoint: 'ftp://x', bucket: '', accessKeyId: 'a', secretAccessKey: 'sEcReT/sEcReT', colour: 'red' },
    }),
  })
  t.match(problems.join('\n'), /region mars: is not a region code/)
  t.match(
    problems.join('\n'),
    /region us-west: unknown fields colour.*endpoint must be an http:\/\/ or https:\/\/ URL; bucket is required/,
  )
  t.notMatch(problems.join('\n'), /sEcReT/)
  t.match(
    parseConfig({ DEFAULT_REGION: 'eu-west', REGION_STORES: JSON.stringify({ 'eu-west': store }) }).problems.join('\n'),
    /REGION_STORES must not name DEFAULT_REGION \(eu-west\)/,
  )
  t.match(parseConfig({ DEFAULT_REGION: 'atlantis' }).problems.join('\n'), /DEFAULT_REGION/)
  t.match(parseConfig({ REGION_STORES: '["eu-west"]' }).problems.join('\n'), /REGION_STORES: must be a JSON object/)
})
