// The API docs (/docs, Swagger UI): names for what Swagger UI renders without an accessible one,
// which axe-core counts as serious or critical and Swagger UI has no option for. Applied as it
// renders, since it renders on demand (an operation opened, the authorize dialog).
'use strict'
;(function () {
  function fix() {
    // The servers list: a <select> inside an empty <label>.
    document.querySelectorAll('select#servers:not([aria-label])').forEach(function (s) {
      s.setAttribute('aria-label', 'Server')
    })
    // The authorize dialog's close button shows an icon alone.
    document.querySelectorAll('button.close-modal:not([aria-label])').forEach(function (b) {
      b.setAttribute('aria-label', 'Close')
    })
    // A button whose name leaves out what it shows ("Authorize" named "Apply credentials", "Logout"
    // named "Remove authorization"): a voice user who says what they see misses it. Named by its text.
    document.querySelectorAll('button[aria-label]').forEach(function (b) {
      var text = b.textContent.trim().toLowerCase()
      if (text && b.getAttribute('aria-label').toLowerCase().indexOf(text) < 0) b.removeAttribute('aria-label')
    })
    // Examples and answers scroll sideways: the keyboard reaches them.
    document.querySelectorAll('pre.microlight:not([tabindex])').forEach(function (p) {
      p.setAttribute('tabindex', '0')
    })
  }
  new MutationObserver(fix).observe(document.documentElement, { childList: true, subtree: true })
})()
