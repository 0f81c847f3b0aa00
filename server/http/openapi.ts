// 'atrium-openapi': the OpenAPI document, made from the schemas of every route registered after
// it, and the docs UI, which ships inside the package so it works offline.
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import fp from 'fastify-plugin'
import { VERSION } from '../../common/version.js'

export const openapiPlugin = fp(
  async (app) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: { title: 'Atrium API', version: VERSION, description: 'Multi-tenant AI application platform, on-premise distribution.' },
        servers: [{ url: app.platform.config.PUBLIC_URL }],
        components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key (svc_sdk_..., svc_ci_..., svc_admin_...) or a JWT access token' } } },
        security: [{ bearer: [] }],
      },
      refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
    })
    await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: '/openapi.json' }, logLevel: 'warn' })
  },
  { name: 'atrium-openapi', dependencies: ['atrium-platform'] },
)
