// The Compose bundle's own variables in .env and what they make Atrium's service settings. Kept
// apart from config/bundles.ts (the renderers) because the secret rule (config/secrets.ts) reads
// COMPOSE_SERVICE_SETTINGS, and the renderers in turn import that rule.

/**
 * The bundled services as Compose profiles (compose.yaml), each with the setting that points
 * Atrium at it: a site whose setting names its own service runs without that profile.
 */
export const PROFILE_SETTINGS = { postgres: 'DATABASE_URL', redis: 'REDIS_URL', s3: 'R2_ENDPOINT' } as const
export const BUNDLED_PROFILES = Object.keys(PROFILE_SETTINGS) as (keyof typeof PROFILE_SETTINGS)[]

/** Atrium's own user of the bundled MinIO, made by its bucket job (minio-init) with a policy on the bucket alone. */
export const MINIO_ATRIUM_USER = 'atrium-server'

/** Variables the Compose bundle itself reads from .env, besides Atrium's settings (isSecret says which are secret). */
export const COMPOSE_VARIABLES: Record<string, { description: string; example: string }> = {
  ATRIUM_SITE: {
    description:
      "This site's name on the engine: the Compose project, its containers and network, and its volumes (<name>-postgres, -redis, -minio, -data) carry it; two sites on one engine need two names",
    example: 'atrium',
  },
  COMPOSE_PROFILES: {
    description:
      'Bundled services this site runs (postgres, redis, s3, comma-separated); leave one out when DATABASE_URL, REDIS_URL or R2_ENDPOINT names your own',
    example: BUNDLED_PROFILES.join(','),
  },
  ATRIUM_REGISTRY: {
    description:
      "Registry that replaces every image's registry (air-gapped: your private registry); empty pulls from the public ones",
    example: '',
  },
  ATRIUM_DATA_PATH: {
    description: 'Folder on this machine that holds the named volumes\' data (see "Install with Compose" in README.md)',
    example: '/var/lib/atrium',
  },
  ATRIUM_S3_PORT: {
    description: 'Port on this machine where the bundled MinIO answers download links',
    example: '9000',
  },
  ATRIUM_BIND_ADDRESS: {
    description:
      "Address on this machine the API and the bundled MinIO are published at (0.0.0.0: every interface; e.g. 127.0.0.1 behind a reverse proxy on this machine, or one interface's address)",
    example: '0.0.0.0',
  },
  ATRIUM_METRICS_PORT: {
    description:
      'Port on this machine where /metrics is published, on 127.0.0.1 only (it asks for no credentials): scrape it from here, or publish it further with a Compose override of your own',
    example: '9464',
  },
  POSTGRES_PASSWORD: {
    description: "Password of the bundled PostgreSQL's atrium user (openssl rand -hex 24); DATABASE_URL must use it",
    example: '',
  },
  REDIS_PASSWORD: {
    description: 'Password of the bundled Redis (openssl rand -hex 24); REDIS_URL must use it',
    example: '',
  },
  MINIO_ROOT_USER: {
    description: 'Administrator of the bundled MinIO (only its bucket job uses it; Atrium has a user of its own)',
    example: 'atrium',
  },
  MINIO_ROOT_PASSWORD: {
    description: "Administrator's password of the bundled MinIO (openssl rand -hex 24)",
    example: '',
  },
  MINIO_ATRIUM_PASSWORD: {
    description: `Secret key of Atrium's own MinIO user, ${'`'}${MINIO_ATRIUM_USER}${'`'}, allowed its bucket only (openssl rand -hex 24); R2_SECRET_ACCESS_KEY must be the same`,
    example: '',
  },
}

/** What the bundled services make the service settings, for .env.example and the installer. */
export const COMPOSE_SERVICE_SETTINGS = {
  DATABASE_URL: 'postgres://atrium:${POSTGRES_PASSWORD}@postgres:5432/atrium',
  REDIS_URL: 'redis://:${REDIS_PASSWORD}@redis:6379',
  R2_ENDPOINT: 'http://minio:9000',
  R2_ACCESS_KEY_ID: MINIO_ATRIUM_USER,
  R2_SECRET_ACCESS_KEY: '${MINIO_ATRIUM_PASSWORD}',
} as const
