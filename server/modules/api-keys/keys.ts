// API key format: svc_<type>_<32 base62 characters> (about 190 random bits). Only a SHA-256 of the
// key is stored: the key is high-entropy, so a slow password hash would add latency, not safety.
import { createHash } from 'node:crypto'
import { randomBase62 } from '../../ids.js'

export const KEY_TYPES = ['sdk', 'ci', 'admin'] as const
export type KeyType = (typeof KEY_TYPES)[number]

const SECRET_LENGTH = 32
const KEY_RE = /^svc_(sdk|ci|admin)_[A-Za-z0-9]{32}$/

export function generateKey(type: KeyType): { key: string; prefix: string; lastFour: string; hash: Buffer } {
  const key = `svc_${type}_${randomBase62(SECRET_LENGTH)}`
  return { key, prefix: key.slice(0, `svc_${type}_`.length + 4), lastFour: key.slice(-4), hash: hashKey(key) }
}

export const looksLikeKey = (token: string) => KEY_RE.test(token)

export const hashKey = (key: string) => createHash('sha256').update(key).digest()
