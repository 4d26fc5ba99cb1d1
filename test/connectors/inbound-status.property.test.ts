/**
 * The inbound status rule as a property, on a real connector row: for any sequence of
 * passing and failing deliveries, each handed the status as the row holds it (as the
 * webhook lookup reads it), the row ends as the rule says (verified after a pass, failing
 * after FAILING_AFTER failures in a row, else as it was) and is written only when that
 * changes it.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { FAILING_AFTER, inboundStatus } from '../../src/connectors/inbound-status.ts';
import { jsonApi, seedTenant, startApp, tokenFor } from '../helpers/app.ts';

const t = await startApp();
after(() => t.close());
const tenant = await seedTenant(t.deps);
const api = jsonApi(t, await tokenFor(t, tenant));

async function connector(): Promise<string> {
  const r = await api.post('/api/json/v1/external_connectors', {
    data: { type: 'external_connector', attributes: { name: 'hooks', auth_type: 'hmac', direction: 'inbound', config: { signature_scheme: 'github' } } },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const read = async (id: string) => t.deps.db.selectFrom('external_connectors').select(['status', 'last_error']).where('id', '=', id).executeTakeFirstOrThrow();

describe('inbound status rule', () => {
  it('the row follows the rule, and each statement changes it', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.boolean(), { minLength: 1, maxLength: 14 }), async (outcomes) => {
        const id = await connector();
        // No interval: the rule alone, one statement per change asked for.
        const s = inboundStatus(t.deps.db, t.deps.clock, t.deps.log, { intervalMs: 0 });
        let model = 'unverified';
        let run = 0;
        try {
          for (const ok of outcomes) {
            run = ok ? 0 : run + 1;
            const before = model;
            if (ok) model = 'verified';
            else if (run >= FAILING_AFTER) model = 'failing';
            const row = await read(id);
            const statements = s.counts.statements;
            s.observe({
              workspaceId: tenant.workspaceId,
              connectorId: id,
              status: row.status,
              failure: ok ? undefined : 'signature mismatch (X-Hub-Signature-256)',
              at: t.deps.clock(),
            });
            await s.settled();
            const now = await read(id);
            assert.equal(now.status, model);
            assert.equal(s.counts.statements - statements, before === model ? 0 : 1, 'a statement exactly when the status changes');
            if (model === 'failing') assert.match(now.last_error ?? '', /^signature mismatch \(X-Hub-Signature-256\) at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
            if (model === 'verified') assert.equal(now.last_error, null);
          }
          assert.equal(s.counts.changed, s.counts.statements);
        } finally {
          s.close();
        }
      }),
      { numRuns: 25 },
    );
  });
});
