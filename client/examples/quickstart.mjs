// A one-file application on @atrium/client: make a project, write a file into it, list the
// projects. Run: ATRIUM_URL=https://atrium.example.com ATRIUM_API_KEY=svc_sdk_... node quickstart.mjs
import { AtriumClient, AtriumError } from '@atrium/client'

const atrium = new AtriumClient({ baseUrl: process.env.ATRIUM_URL, apiKey: process.env.ATRIUM_API_KEY })

try {
  const project = await atrium.projects.create({ name: 'Quick start', description: 'made by examples/quickstart.mjs' })
  await atrium.projects.writeFile(project.id, 'README.md', '# Hello from the client\n')
  const names = []
  for await (const p of atrium.projects.list()) names.push(p.name)
  const files = []
  for await (const f of atrium.projects.files(project.id)) files.push(f.path)
  console.log(JSON.stringify({ project: project.id, projects: names, files }))
} catch (err) {
  if (err instanceof AtriumError) console.error(`${err.code}: ${err.message} (request ${err.requestId})`)
  else console.error(err)
  process.exitCode = 1
}
