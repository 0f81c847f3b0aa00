// Regions and a tenant's regional preferences, feature checks and routing information.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { COMPLIANCE_LEVEL_NAMES, REGION_CODES } from '../../../common/regions.js'
import { FEATURE_KEYS } from '../../domain/features.js'
import { PLANS } from '../../domain/plans.js'
import { actorOf, tenantPathActor } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { okSchema } from '../../http/route-schemas.js'
import { apiErrors, Envelope, oneOf, TenantParams } from '../../http/schemas.js'
import { BYOS_PROVIDERS, type RegionsService } from './service.js'

const tags = ['regions']
const Code = oneOf(REGION_CODES)
const Level = oneOf(COMPLIANCE_LEVEL_NAMES)
const Nullable = <T extends ReturnType<typeof oneOf>>(s: T) => Type.Union([s, Type.Null()])

const Region = Type.Object({
  code: Code,
  name: Type.String(),
  city: Type.String(),
  frameworks: Type.Array(Type.String()),
  available: Type.Boolean({ description: 'This deployment stores data there (DEFAULT_REGION or REGION_STORES)' }),
  default: Type.Boolean({
    description: "The region of the deployment's own store, where tenants' data lives unless they choose another",
  }),
})

const Preferences = Type.Object({
  tenantId: Type.String({ format: 'uuid' }),
  primaryRegion: Code,
  secondaryRegion: Nullable(Code),
  dataResidencyRequired: Type.Boolean(),
  dataResidencyRegion: Nullable(Code),
  complianceLevel: Level,
  updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'null: the defaults, never changed',
  }),
})

const PreferencesPatch = Type.Object(
  {
    primaryRegion: Type.Optional(Code),
    secondaryRegion: Type.Optional(Nullable(Code)),
    dataResidencyRequired: Type.Optional(Type.Boolean()),
    dataResidencyRegion: Type.Optional(Nullable(Code)),
    complianceLevel: Type.Optional(Level),
  },
  { additionalProperties: false, minProperties: 1 },
)

const Feature = Type.Object({
  featureKey: oneOf(FEATURE_KEYS),
  enabled: Type.Boolean(),
  reason: Type.Union([Type.Literal('air-gapped'), Type.Literal('not-configured'), Type.Literal('plan'), Type.Null()], {
    description: 'null when enabled',
  }),
  requiredPlan: Type.Union([oneOf(PLANS), Type.Null()], {
    description: 'The smallest plan that has it, when the plan is the reason',
  }),
  setting: Type.Union([Type.String(), Type.Null()], {
    description: 'The deployment setting that turns it on, when the deployment is the reason',
  }),
})

const RoutingInfo = Type.Object({
  tenantId: Type.String({ format: 'uuid' }),
  region: Code,
  storageMode: Type.Union([Type.Literal('platform'), Type.Literal('byos')]),
  dataResidencyRequired: Type.Boolean(),
  store: Type.Object({
    kind: Type.String(),
    endpoint: Type.Union([Type.String(), Type.Null()]),
    bucket: Type.Union([Type.String(), Type.Null()]),
  }),
  database: Type.Object({
    kind: Type.String(),
    host: Type.Union([Type.String(), Type.Null()]),
    name: Type.Union([Type.String(), Type.Null()]),
  }),
  replica: Type.Object({ id: Type.String(), version: Type.String() }),
  at: Type.String({ format: 'date-time' }),
})

const read: FastifyContextConfig = { permission: 'settings:read', operator: 'also' }

const Provider = oneOf(BYOS_PROVIDERS)
const ByosFields = {
  byosProvider: Type.Optional(Provider),
  byosEndpoint: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 2000,
      description:
        'http(s)://host[:port] of an S3-compatible store: S3, R2, GCS (interoperability), an S3 connector for Azure Blob, MinIO',
    }),
  ),
  byosBucket: Type.Optional(
    Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.\\-]{1,61}[a-z0-9]$' }),
  ),
  byosRegion: Type.Optional(Type.String({ maxLength: 64, description: 'Default us-east-1 (auto for r2)' })),
  byosAccessKey: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 512,
      description: 'Write-only: sealed at rest, never returned; omitted, the saved one is kept',
    }),
  ),
  byosSecretKey: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 512,
      description: 'Write-only: sealed at rest, never returned; omitted, the saved one is kept',
    }),
  ),
}
const StorageMode = Type.Union([Type.Literal('platform'), Type.Literal('byos')])
const StoragePut = Type.Object(
  {
    storageMode: StorageMode,
    platformRegion: Type.Optional(Code),
    ...ByosFields,
  },
  { additionalProperties: false },
)
/**
 * The same body as the PUT, so that a client validates the object it is about to save; storageMode
 * may be left out (byos), as clients written before validate took it send.
 */
const StorageValidate = Type.Object(
  {
    ...StoragePut.properties,
    storageMode: Type.Optional({ ...StorageMode, description: 'Default byos' }),
  },
  { additionalProperties: false },
)
const StorageConfiguration = Type.Object({
  tenantId: Type.String({ format: 'uuid' }),
  storageMode: Type.Union([Type.Literal('platform'), Type.Literal('byos')]),
  platformRegion: Code,
  byosProvider: Type.Union([Provider, Type.Null()]),
  byosEndpoint: Type.Union([Type.String(), Type.Null()]),
  byosBucket: Type.Union([Type.String(), Type.Null()]),
  byosRegion: Type.Union([Type.String(), Type.Null()]),
  byosAccessKey: Type.Object({ configured: Type.Boolean(), lastFour: Type.Union([Type.String(), Type.Null()]) }),
  byosSecretKey: Type.Object({ configured: Type.Boolean() }),
  updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})
const Check = Type.Object({
  id: Type.String(),
  title: Type.String(),
  status: Type.Union([Type.Literal('pass'), Type.Literal('warn'), Type.Literal('fail')]),
  found: Type.String(),
  required: Type.String(),
  fix: Type.String({ description: 'How to fix it; empty when it passed' }),
})

export const regionsRoutes: FastifyPluginAsyncTypebox<{ regions: RegionsService }> = async (app, { regions }) => {
  app.get(
    '/regions',
    {
      config: { operator: 'also' },
      schema: okSchema(
        tags,
        "The specification's regions, and which this deployment stores data in",
        Type.Array(Region),
      ),
    },
    async (req) => ok(req, regions.regions()),
  )

  app.get(
    '/regions/preferences/:tenantId',
    {
      config: read,
      schema: {
        tags,
        summary: "A tenant's regional preferences (your own tenant; another is 404)",
        params: TenantParams,
        response: { 200: Envelope(Preferences), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await regions.preferences(tenantPathActor(req), req.params.tenantId)),
  )

  const patch = {
    tags,
    description:
      'Rules (each refusal names details.rule): regions must be ones this deployment serves; secondaryRegion needs the Growth plan and differs from primaryRegion; dataResidencyRequired needs Growth or Enterprise, names dataResidencyRegion, makes primaryRegion that region and allows no secondaryRegion; complianceLevel must be served in primaryRegion and secondaryRegion. New objects of the tenant go to its region’s store from then on.',
    body: PreferencesPatch,
    response: { 200: Envelope(Preferences), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND', 'FEATURE_DISABLED') },
  }
  app.patch(
    '/regions/preferences/:tenantId',
    {
      config: { permission: 'settings:write' },
      schema: { ...patch, summary: "Change your tenant's regional preferences", params: TenantParams },
    },
    async (req) => ok(req, await regions.update(actorOf(req), req.params.tenantId, req.body)),
  )
  app.patch(
    '/platform/tenants/:tenantId/regional-preferences',
    {
      config: { operator: true },
      schema: {
        ...patch,
        summary: "Change any tenant's regional preferences (platform operator keys)",
        params: TenantParams,
      },
    },
    async (req) => ok(req, await regions.update(actorOf(req, { platform: true }), req.params.tenantId, req.body)),
  )

  app.get(
    '/regions/features/:tenantId/check/:featureKey',
    {
      config: { operator: 'also' },
      schema: {
        tags,
        summary: 'Whether the tenant may use a feature on this deployment: the same answer the feature itself gives',
        params: Type.Object({ tenantId: Type.String({ format: 'uuid' }), featureKey: oneOf(FEATURE_KEYS) }),
        response: { 200: Envelope(Feature), ...apiErrors('RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await regions.feature(tenantPathActor(req), req.params.tenantId, req.params.featureKey)),
  )

  app.get(
    '/regions/storage/:tenantId',
    {
      config: read,
      schema: {
        tags,
        summary: "A tenant's storage: platform (its region's store) or its own (BYOS); keys never shown",
        params: TenantParams,
        response: { 200: Envelope(StorageConfiguration), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await regions.storageSettings(tenantPathActor(req), req.params.tenantId)),
  )

  app.put(
    '/regions/storage/:tenantId',
    {
      config: { permission: 'settings:write' },
      schema: {
        tags,
        summary: "Choose your tenant's storage: platform, or a store of your own (BYOS, Enterprise)",
        description:
          'byos: the store must pass every check of .../validate first (VALIDATION_ERROR, details.rule store-check, details.checks); keys omitted keep the saved ones. Objects written before a change stay where they were and stay readable.',
        params: TenantParams,
        body: StoragePut,
        response: { 200: Envelope(StorageConfiguration), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, await regions.putStorage(actorOf(req), req.params.tenantId, req.body)),
  )

  app.post(
    '/regions/storage/:tenantId/validate',
    {
      config: { permission: 'settings:write' },
      schema: {
        tags,
        summary: 'Check a storage configuration (the body of the PUT) without saving anything',
        description:
          'Checks in order, reported like the installer’s. byos (also when storageMode is left out; Enterprise): endpoint, outbound policy, reachable, TLS, credentials, bucket, write, read back, delete, region, then platform-region when platformRegion is given. platform: platform-region (a region this site stores data in that the regional preferences allow, as the PUT would apply them), platform-store (that region’s store answers). The list stops at the first failure.',
        params: TenantParams,
        body: StorageValidate,
        response: {
          200: Envelope(Type.Object({ valid: Type.Boolean(), checks: Type.Array(Check) })),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        },
      },
    },
    async (req) => ok(req, await regions.validateStorage(actorOf(req), req.params.tenantId, req.body)),
  )

  app.get(
    '/routing-info',
    {
      config: { permission: 'settings:read' },
      schema: okSchema(
        tags,
        "Where this request's tenant data lives and who answers (nothing secret)",
        RoutingInfo,
        'FORBIDDEN',
      ),
    },
    async (req) => ok(req, await regions.routingInfo(actorOf(req))),
  )
}
