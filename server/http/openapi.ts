// 'atrium-openapi': the OpenAPI document, made from the schemas of every route registered after
// it, and the docs UI, which ships inside the package so it works offline.
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { VERSION } from '../../common/version.js'
import { readAsset } from './pages.js'

type Parameter = { required?: boolean; schema?: { default?: unknown } }
type BodySchema = { required?: string[]; properties?: Record<string, { default?: unknown }> }
type Operation = { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: BodySchema }> } }
type Document = { paths?: Record<string, Record<string, Operation>> }

/**
 * A query parameter or body field with a default may be left out (the server fills it in), but the
 * route's schema lists it as required, and generated clients would then make callers pass `limit`
 * on every list. The document says what the server accepts.
 */
function optionalDefaults<T>(generated: T): T {
  // A copy: the generator may share schema objects with the routes' validators.
  const doc = structuredClone(generated)
  for (const item of Object.values((doc as Document).paths ?? {})) {
    for (const op of Object.values(item)) {
      for (const p of op.parameters ?? []) if (p.schema?.default !== undefined) p.required = false
      for (const { schema } of Object.values(op.requestBody?.content ?? {})) {
        if (!schema?.required || !schema.properties) continue
        schema.required = schema.required.filter((name) => schema.properties![name]?.default === undefined)
        if (!schema.required.length) delete schema.required
      }
    }
  }
  return doc
}

// Swagger UI's colours darkened and the names it leaves out, for the docs to pass WCAG AA.
const DOCS_STYLE = readAsset(import.meta.url, 'docs-theme.css')
const DOCS_SCRIPT = readAsset(import.meta.url, 'docs-theme.js')

export const openapiPlugin = fp(
  async (app) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: {
          title: 'Atrium API',
          version: VERSION,
          description: 'Multi-tenant AI application platform, on-premise distribution.',
        },
        servers: [{ url: app.platform.config.PUBLIC_URL }],
        components: {
          securitySchemes: {
            bearer: {
              type: 'http',
              scheme: 'bearer',
              description: 'An API key (svc_sdk_..., svc_ci_..., svc_admin_...) or a JWT access token',
            },
          },
        },
        security: [{ bearer: [] }],
      },
      refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transformObject: (documents) =>
        optionalDefaults('openapiObject' in documents ? documents.openapiObject : documents.swaggerObject),
    })
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: {
        url: '/openapi.json',
        // Accessibility (axe-core, test/browser/docs-page.test.ts). No top bar: its logo has no
        // text and its address field no label, and the docs show the one document anyway. Without
        // deep links an operation's heading is one button, not a button holding a link. Answers as
        // plain text: the highlighter's colours fall under 4.5:1 on its dark background.
        layout: 'BaseLayout',
        deepLinking: false,
        syntaxHighlight: false,
      },
      theme: {
        title: 'Atrium API',
        css: [{ filename: 'atrium.css', content: DOCS_STYLE }],
        js: [{ filename: 'atrium.js', content: DOCS_SCRIPT }],
      },
      logLevel: 'warn',
    })
  },
  { name: 'atrium-openapi', dependencies: ['atrium-platform'] },
)
