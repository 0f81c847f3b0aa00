// Route schemas compiled when a route is first used, not at start-up. Fastify compiles every route's
// validators (ajv) and response serializers (fast-json-stringify, one per status code) when the app
// gets ready: with this API's routes that was most of the start-up time and about 55 MB of memory,
// spent mostly on routes a given replica may never serve (docs/performance.md). A route's first
// request now compiles its own schemas (a few milliseconds, once). compileAll() compiles every one
// still waiting: the tests call it, so a schema that cannot compile fails there, not on a request.
import SerializerSelector from '@fastify/fast-json-stringify-compiler'

export interface CompileOnUse {
  /** A schema function compiled on its first call. Its `errors` (ajv's) are those of the last call. */
  lazily<F extends (data: never) => unknown>(compile: () => F): F
  /** Compiles every schema not compiled yet; throws the first failure. */
  compileAll(): void
  /** How many are still waiting (the tests read it). */
  readonly waiting: number
}

export function compileOnUse(): CompileOnUse {
  const waiting = new Set<() => void>()
  return {
    lazily<F extends (data: never) => unknown>(compile: () => F): F {
      let compiled: F | null = null
      const get = () => {
        if (!compiled) {
          compiled = compile()
          waiting.delete(get)
        }
        return compiled
      }
      waiting.add(get)
      const lazy = (data: never) => {
        const fn = get()
        const result = fn(data)
        ;(lazy as { errors?: unknown }).errors = (fn as { errors?: unknown }).errors
        return result
      }
      return lazy as unknown as F
    },
    compileAll() {
      for (const get of [...waiting]) get()
    },
    get waiting() {
      return waiting.size
    },
  }
}

type BuildSerializer = ReturnType<typeof SerializerSelector>

/** Fastify's own serializer factory (fast-json-stringify), each serializer compiled on first use. */
export function serializersOnUse(c: CompileOnUse): BuildSerializer {
  const build = SerializerSelector()
  return (externalSchemas, options) => {
    const compiler = build(externalSchemas, options)
    return (route) => c.lazily(() => compiler(route))
  }
}
