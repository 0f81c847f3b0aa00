// The server's OpenAPI document as the tests that walk every operation read it (the fuzz test, the
// air-gap sweep): each operation with its path parameters, query parameters and JSON body schema,
// $refs resolved.

export type Schema = Record<string, any> // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON Schema from the document

export interface Operation {
  method: string
  path: string
  pathParams: string[]
  query: { name: string; required: boolean; schema: Schema }[]
  body: Schema | null
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete']

/** A schema with its $ref (a JSON pointer into `doc`) followed, however deep. */
export const derefIn =
  (doc: Schema) =>
  (s: Schema): Schema =>
    typeof s?.$ref === 'string'
      ? derefIn(doc)(
          s.$ref
            .split('/')
            .slice(1)
            .reduce((o: Schema, k: string) => o[k], doc),
        )
      : s

/** Every operation of the document, in its order. */
export function operationsOf(doc: Schema): Operation[] {
  const deref = derefIn(doc)
  return Object.entries<Schema>(doc.paths).flatMap(([path, item]) =>
    Object.entries<Schema>(item)
      .filter(([m]) => METHODS.includes(m))
      .map(([m, op]) => {
        const params: Schema[] = (op.parameters ?? []).map(deref)
        return {
          method: m.toUpperCase(),
          path,
          pathParams: params.filter((p) => p.in === 'path').map((p) => p.name as string),
          query: params
            .filter((p) => p.in === 'query')
            .map((p) => ({ name: p.name as string, required: p.required === true, schema: deref(p.schema ?? {}) })),
          body: op.requestBody ? deref(op.requestBody.content?.['application/json']?.schema ?? {}) : null,
        }
      }),
  )
}
