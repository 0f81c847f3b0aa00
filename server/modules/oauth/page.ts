// The page at the redirect URI. The identity provider sends the browser here with code and state in
// the query; the script POSTs them to authorize (same origin, so the binding cookie goes along and
// the session cookie comes back) and says how it went. No inline script or style: the CSP allows
// only this origin (http/pages.ts).

export const CALLBACK_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Signing in - Atrium</title>
<link rel="stylesheet" href="../../pages/atrium.css">
<script src="../callback.js" defer></script>
</head>
<body>
<main>
<h1>Atrium</h1>
<p id="status" role="status">Signing you in...</p>
<p><a id="continue" href="/" hidden>Continue to Atrium</a></p>
<noscript><p>Signing in needs JavaScript.</p></noscript>
</main>
</body>
</html>
`

export const CALLBACK_JS = `'use strict'
;(async () => {
  const status = document.getElementById('status')
  const show = (text) => { status.textContent = text }
  const query = window.location.search
  // The code is single use, but it has no business in the history or a bookmark.
  window.history.replaceState(null, '', window.location.pathname)
  if (!query) return show('Nothing to complete here: start signing in again.')
  try {
    // Relative to /oauth/{provider}/callback: this provider's authorize endpoint.
    const res = await fetch('authorize', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ callbackUrl: query }),
    })
    const body = await res.json().catch(() => null)
    if (res.ok && body && body.data) {
      show('Signed in as ' + body.data.user.email + ' (' + body.data.tenant.name + ').')
      document.getElementById('continue').hidden = false
    } else {
      show('Sign-in failed: ' + (body && body.error ? body.error.message : 'HTTP ' + res.status))
    }
  } catch {
    show('Sign-in failed: Atrium could not be reached.')
  }
})()
`
