// The CLI login approval page's script. Served from our own origin because the page's Content
// Security Policy allows no inline script. Every URL is relative to the page (/cli/auth/approve), so
// a deployment served under a path prefix works unchanged. Requests carry the HttpOnly session
// cookie (credentials: 'same-origin'); this script never sees or stores a token beyond one call.
'use strict'
;(function () {
  var $ = function (id) {
    return document.getElementById(id)
  }
  var params = new URLSearchParams(window.location.search)
  var loginId = params.get('loginId') || ''
  var state = params.get('state') || ''

  function say(text, kind) {
    var m = $('message')
    m.textContent = text
    m.className = kind || ''
  }

  function show(id, visible) {
    $(id).hidden = !visible
  }

  /** fetch, JSON in and out; resolves to { ok, status, data, error } and never rejects. */
  function call(path, options) {
    options = options || {}
    var headers = { accept: 'application/json' }
    if (options.body !== undefined) headers['content-type'] = 'application/json'
    if (options.bearer) headers.authorization = 'Bearer ' + options.bearer
    return fetch(new URL(path, window.location.href).toString(), {
      method: options.method || 'GET',
      credentials: 'same-origin',
      headers: headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    }).then(
      function (res) {
        return res
          .json()
          .catch(function () {
            return null
          })
          .then(function (json) {
            return { ok: res.ok, status: res.status, data: json && json.data, error: json && json.error }
          })
      },
      function () {
        return {
          ok: false,
          status: 0,
          data: null,
          error: { code: 'NETWORK', message: 'The server could not be reached. Check your connection and try again.' },
        }
      },
    )
  }

  var STATUS_TEXT = {
    approved: 'This sign-in has already been approved. Return to your terminal.',
    consumed: 'This sign-in has already been completed. Return to your terminal.',
    expired: 'This sign-in request has expired. Run the login command again.',
  }

  function when(iso) {
    return new Date(iso).toLocaleString()
  }

  function signedInAs(user, tenant) {
    $('who').textContent = 'Signed in as ' + user.email + (tenant && tenant.name ? ' (' + tenant.name + ')' : '') + '.'
    show('signin', false)
    show('approval', true)
    $('approve').focus()
  }

  function needSignIn() {
    show('approval', false)
    show('signin', true)
    $('email').focus()
  }

  /** Whether the browser holds a live session: exchange the cookie for an access token, then ask who it is. */
  function whoAmI() {
    return call('../../api/v1/auth/exchange', { method: 'POST', body: {} }).then(function (ex) {
      if (!ex.ok) return null
      return call('../../api/v1/auth/me', { bearer: ex.data.accessToken }).then(function (me) {
        return me.ok && me.data.user ? me.data : null
      })
    })
  }

  function load() {
    if (!/^[A-Za-z0-9_-]{43}$/.test(loginId) || !/^[0-9a-f]{64}$/.test(state)) {
      say('This link is incomplete or damaged. Run the login command again and open the link it shows.', 'error')
      return
    }
    call('info?loginId=' + encodeURIComponent(loginId)).then(function (info) {
      if (!info.ok) {
        say(
          info.status === 404
            ? 'This sign-in request does not exist. Run the login command again.'
            : info.error.message,
          'error',
        )
        return
      }
      var d = info.data
      $('code').textContent = d.verificationCode
      $('client').textContent = 'Atrium CLI ' + d.cliVersion
      $('platform').textContent = d.platform
      $('ip').textContent = d.requesterIp
      $('created').textContent = when(d.createdAt)
      $('expires').textContent = when(d.expiresAt)
      show('request', true)
      if (d.status !== 'pending') {
        say(STATUS_TEXT[d.status] || 'This sign-in can no longer be approved.', 'error')
        return
      }
      whoAmI().then(function (me) {
        if (me) signedInAs(me.user, me.tenant)
        else needSignIn()
      })
    })
  }

  $('signin').addEventListener('submit', function (event) {
    event.preventDefault()
    var button = event.target.querySelector('button')
    button.disabled = true
    say('Signing in…')
    call('../../api/v1/auth/login', {
      method: 'POST',
      body: { email: $('email').value, password: $('password').value },
    }).then(function (r) {
      button.disabled = false
      $('password').value = ''
      if (!r.ok) {
        say(r.error ? r.error.message : 'Sign-in failed.', 'error')
        return
      }
      say('')
      signedInAs(r.data.user, r.data.tenant)
    })
  })

  $('approve').addEventListener('click', function () {
    var button = $('approve')
    button.disabled = true
    say('Approving…')
    call('complete', { method: 'POST', body: { loginId: loginId, state: state } }).then(function (r) {
      if (r.ok) {
        show('approval', false)
        say('Approved. You can close this page and return to your terminal.', 'success')
        return
      }
      if (r.status === 401) {
        say('Your session has ended. Sign in again to approve.', 'error')
        needSignIn()
        button.disabled = false
      } else if (r.error && r.error.details && r.error.details.status) {
        // Expired or no longer pending: approving again cannot help.
        show('approval', false)
        say(STATUS_TEXT[r.error.details.status] || r.error.message, 'error')
      } else {
        say(r.error ? r.error.message : 'Approval failed.', 'error')
        button.disabled = false
      }
    })
  })

  $('switch').addEventListener('click', function () {
    call('../../api/v1/auth/logout', { method: 'POST', body: {} }).then(function () {
      say('')
      needSignIn()
    })
  })

  load()
})()
