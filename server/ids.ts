// UUIDv7 ids: time-ordered, so "newest first" and cursor pagination are an index scan on the id.
import { v7 } from 'uuid'

export const newId = (): string => v7()
