// The baseline: a bare Fastify hello-world, the ceiling for any Fastify route on this machine.
import Fastify from 'fastify'

const app = Fastify()
app.get('/', async () => ({ hello: 'world' }))
const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' })
process.stderr.write(`listening on ${address}\n`)
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)))
