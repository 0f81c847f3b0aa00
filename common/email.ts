// What Atrium accepts as an email address, in a module of its own with no dependencies so the
// installer checks an admin's address by the same rule the server will apply to it.
export const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
