// The invitation page's script. The token travels in the address's fragment (#token=...), which
// browsers never send to a server or put in a Referer; the script takes it out of the address bar
// at once, then POSTs it with the chosen password. The answer sets the HttpOnly session cookie.
'use strict'
;(function () {
  var $ = function (id) {
    return document.getElementById(id)
  }
  var MIN_LENGTH = 12
  var token = new URLSearchParams(window.location.hash.replace(/^#/, '')).get('token') || ''
  window.history.replaceState(null, '', window.location.pathname)

  function say(text, kind) {
    var m = $('message')
    m.textContent = text
    m.className = kind || ''
  }

  var REASONS = {
    UNAUTHORIZED:
      'This invitation link is not valid any more: it was used, withdrawn or has expired. Ask your administrator for a new one.',
    FORBIDDEN: 'This account cannot join: it was disabled or the workspace is suspended. Ask your administrator.',
  }

  if (!/^[A-Za-z0-9_-]{20,200}$/.test(token)) {
    say('This link is incomplete or damaged. Open the whole link from your invitation.', 'error')
    return
  }
  $('min-length').textContent = String(MIN_LENGTH)
  $('accept').hidden = false
  $('password').focus()

  $('accept').addEventListener('submit', function (event) {
    event.preventDefault()
    var password = $('password').value
    if (password.length < MIN_LENGTH) return say('The password needs at least ' + MIN_LENGTH + ' characters.', 'error')
    if (password !== $('confirm').value) return say('The two passwords differ.', 'error')
    var body = { token: token, password: password }
    var name = $('name').value.trim()
    if (name) body.name = name
    var button = event.target.querySelector('button')
    button.disabled = true
    say('Joining…')
    fetch(new URL('../api/v1/auth/invitations/accept', window.location.href).toString(), {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
    }).then(
      function (res) {
        return res
          .json()
          .catch(function () {
            return null
          })
          .then(function (json) {
            if (res.ok && json && json.data) {
              $('accept').hidden = true
              say(
                'Welcome, ' +
                  json.data.user.email +
                  '. You have joined ' +
                  json.data.tenant.name +
                  ' and are signed in.',
                'success',
              )
              return
            }
            var error = json && json.error
            button.disabled = false
            say(
              (error && REASONS[error.code]) || (error ? error.message : 'Accepting failed (HTTP ' + res.status + ').'),
              'error',
            )
          })
      },
      function () {
        button.disabled = false
        say('The server could not be reached. Check your connection and try again.', 'error')
      },
    )
  })
})()
