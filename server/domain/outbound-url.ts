// A URL the server is asked to call (a webhook endpoint, an LLM base URL), checked as text before
// the outbound policy judges its host (platform/outbound.ts outboundHostAllowed).
import { invalid } from './errors.js'

/**
 * A URL the server will call: parsed, http(s) only (https only unless `allowHttp`), no credentials
 * in it (a URL is shown and logged; secrets belong in sealed fields). VALIDATION_ERROR on `field`.
 */
export function outboundUrl(
  field: string,
  value: string,
  o: { allowHttp: boolean; httpRefused?: string; credentials: string },
): URL {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    throw invalid(field, 'is not a URL')
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && o.allowHttp))
    throw invalid(field, o.allowHttp ? 'must be an http or https URL' : (o.httpRefused ?? 'must be an https URL'))
  if (url.username || url.password) throw invalid(field, `must not contain credentials: ${o.credentials}`)
  return url
}
