// The history a reply is given: the newest messages that fit the budget, oldest first, and always
// the message being answered however long it is.
import t from 'tap'
import { CONTEXT_CHARS, trimHistory } from '../../../../server/modules/chat/replies.js'

const m = (role: 'user' | 'assistant', n: number, c = 'x') => ({ role, content: c.repeat(n) })

t.test('the newest messages that fit, oldest first', async (t) => {
  const newestFirst = [m('user', 10, 'c'), m('assistant', 10, 'b'), m('user', 10, 'a')]
  t.same(trimHistory(newestFirst, 100), [m('user', 10, 'a'), m('assistant', 10, 'b'), m('user', 10, 'c')], 'all fit')
  t.same(trimHistory(newestFirst, 25), [m('assistant', 10, 'b'), m('user', 10, 'c')], 'the oldest is dropped first')
  t.same(trimHistory(newestFirst, 20), [m('assistant', 10, 'b'), m('user', 10, 'c')], 'the budget is inclusive')
})

t.test('the message being answered is kept even over the budget; nothing older then', async (t) => {
  t.same(trimHistory([m('user', CONTEXT_CHARS + 1), m('assistant', 5)]), [m('user', CONTEXT_CHARS + 1)])
  t.same(trimHistory([]), [])
})
