// A run's workspace (tools.ts) and the bytes it stages: what the run wrote over or deleted of its own
// staged files stays stored until the step that did so is saved, since a run resumed after a crash
// takes up its last saved changes, which name them; then it goes, and a run that ends without its
// changes lets go of them all.
import t from 'tap'
import { Workspace } from '../../../../server/modules/agents/tools.js'
import { projectFilesService } from '../../../../server/modules/projects/files-service.js'
import { testApp } from '../../../helpers/app.js'
import { ownerActor } from '../../../helpers/principal.js'

const h = await testApp(t)
const files = projectFilesService({ db: h.platform.db, storage: h.platform.storage })

t.test(
  'bytes a run staged and then wrote over or deleted are let go of once that step is saved, not before',
  async (t) => {
    // found in review: they were deleted at once, and a run resumed from its last saved step named them
    const { call, tenantId, userId } = await h.tenant()
    const projectId = (await call('POST', '/api/v1/projects', { name: 'workspace' })).body.data.id
    const actor = ownerActor(tenantId, userId, 'enterprise')
    const stored = async () => {
      const keys: string[] = []
      for await (const o of h.platform.blobs.list(`tenants/${tenantId}/projects/${projectId}/files/`)) keys.push(o.key)
      return keys.sort()
    }
    const ws = new Workspace(files, actor, projectId, [], 3600_000)
    const first = await ws.write('a.txt', 'the first draft')
    const second = await ws.write('a.txt', 'the second draft')
    t.same(
      await stored(),
      [first.blobKey, second.blobKey].sort(),
      'the first draft is kept while the step that replaced it is not saved',
    )
    await ws.releaseSuperseded()
    t.same(await stored(), [second.blobKey], 'saved: it goes')
    await ws.remove('a.txt')
    t.same(await stored(), [second.blobKey], 'deleting the staged file keeps its bytes until the step is saved')
    const third = await ws.write('b.txt', 'another file')
    await ws.discard()
    t.same(await stored(), [], 'a run that ends without its changes lets go of all of them')
    t.ok(third.stageId)
  },
)
