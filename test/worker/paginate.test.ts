/**
 * Paged calls (docs/workflows.md, "Paged calls"): an http_request with `paginate` collects
 * every page's items, each page under the connector's rate_limit and recorded before the
 * next, so a retry resumes at the page that failed; a Link header's next link; max_pages.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { API, deliver, saveOk, startFlow, waitForRun, type Flow } from '../webhooks/helpers.ts';
import { mockProvider, type Recorded } from '../connectors/mock-provider.ts';
import { parseLinks } from '../../src/steps/http-request.ts';

const f: Flow = await startFlow({ ALLOW_PRIVATE_EGRESS: 'true', RUN_MAX_ATTEMPTS: '3', RUN_RETRY_SCHEDULE: '50ms' }, { worker: true });
const mock = await mockProvider();
after(() => mock.close());

/** Orders ord_0000000001... listed after a cursor (an order id), `limit` a page. */
const ORDERS = Array.from({ length: 10 }, (_, i) => ({ id: `ord_${String(i + 1).padStart(10, '0')}` }));
const queryOf = (r: Recorded) => Object.fromEntries(new URL(r.path, 'http://x').searchParams);
let failOnce: string | undefined;
mock.fallback = (req) => {
  const q = queryOf(req);
  if (failOnce !== undefined && q.cursor === failOnce) {
    failOnce = undefined;
    return { status: 503 };
  }
  const from = q.cursor === undefined ? 0 : ORDERS.findIndex((o) => o.id === q.cursor) + 1;
  const data = ORDERS.slice(from, from + Number(q.limit ?? 2));
  const more = from + data.length < ORDERS.length;
  const next = more ? data.at(-1)!.id : null;
  const headers: Record<string, string> = more
    ? { link: `<${mock.url}/v1/orders?cursor=${next}&limit=${q.limit ?? 2}>; rel="next", <${mock.url}/v1/orders>; rel="first"` }
    : {};
  return { status: 200, body: { data, next_cursor: next, end_cursor: data.at(-1)?.id ?? q.cursor ?? null }, headers };
};
const lists = () => mock.requests.filter((r) => r.path.startsWith('/v1/orders'));

async function connector(name: string, config: Record<string, unknown>): Promise<string> {
  const c = await f.api.post(`${API}/external_connectors`, {
    data: {
      type: 'external_connector',
      attributes: {
        name,
        direction: 'outbound',
        provider_slug: 'tributary-orders',
        secret: `key_${'p'.repeat(40)}`,
        config: { base_url: `${mock.url}/v1`, ...config },
      },
    },
  });
  assert.equal(c.status, 201, c.text);
  return c.body.data.id;
}
const limited = await connector('Orders, 2 a second', { rate_limit: { requests: 2, per_seconds: 1 } });
const orders = await connector('Orders', {});

const fetch = (connectorId: string, paginate: Record<string, unknown>, params: Record<string, string> = { limit: '2' }) => ({
  key: 'fetch',
  type: 'http_request',
  config: { connector_id: connectorId, operation_ref: 'listOrders', params, paginate },
});
const BY_CURSOR = { items: 'response.body.data', next: "response.body.next_cursor ? {'cursor': response.body.next_cursor}" };
const remember = { key: 'remember', type: 'set_state', config: { value: "{'cursor': steps.fetch.last.body.end_cursor}" } };

async function run(steps: unknown[]): Promise<{ id: string; workflowId: string; attrs: any }> {
  const { workflow, tokens } = await saveOk(f, { step_params: steps });
  const d = await deliver(f, `/api/v1/webhooks/${tokens.hook}`, '{}');
  assert.equal(d.status, 202, d.text);
  const id = d.body.workflow_run_id;
  return { id, workflowId: workflow.id, attrs: (await waitForRun(f, id)).attributes };
}
const stateOf = async (workflowId: string) => {
  const r = await f.api.get(`${API}/workflow_states?filter[workflow_id]=${workflowId}`);
  assert.equal(r.status, 200, r.text);
  return r.body.data[0]?.attributes.value;
};

describe('paged calls', () => {
  it('5 pages under a rate_limit of 2 a second take at least 2 s, and the cursor is stored', async () => {
    const before = lists().length;
    const { workflowId, attrs } = await run([fetch(limited, BY_CURSOR), remember]);
    assert.equal(attrs.outcome, 'completed', JSON.stringify(attrs.steps));
    const pages = lists().slice(before);
    assert.equal(pages.length, 5);
    assert.deepEqual(
      pages.map((p) => queryOf(p).cursor),
      [undefined, 'ord_0000000002', 'ord_0000000004', 'ord_0000000006', 'ord_0000000008'],
    );
    // Work-done timing of the rate limiter, measured on the provider: pages 3 and 5 wait for the budget.
    assert.ok(pages[4]!.at - pages[0]!.at >= 2000, `${pages[4]!.at - pages[0]!.at} ms between the first and the last page`);
    const out = attrs.steps[0].output;
    assert.deepEqual(
      out.items.map((o: any) => o.id),
      ORDERS.map((o) => o.id),
    );
    assert.equal(out.pages, 5);
    assert.equal(out.next, null);
    assert.equal(out.last.status, 200);
    assert.deepEqual(await stateOf(workflowId), { cursor: 'ord_0000000010' });
    assert.deepEqual(
      pages.map((p) => p.headers['idempotency-key']),
      [undefined, undefined, undefined, undefined, undefined],
      'a GET carries no Idempotency-Key',
    );
  });

  it('a 503 on page 4 is retried without fetching pages 1 to 3 again', async () => {
    const before = lists().length;
    failOnce = 'ord_0000000006';
    const { attrs } = await run([fetch(orders, BY_CURSOR), remember]);
    assert.equal(attrs.outcome, 'completed', JSON.stringify(attrs.steps));
    assert.equal(attrs.attempt, 2);
    assert.deepEqual(
      lists()
        .slice(before)
        .map((p) => queryOf(p).cursor),
      [undefined, 'ord_0000000002', 'ord_0000000004', 'ord_0000000006', 'ord_0000000006', 'ord_0000000008'],
      'page 4 twice, the others once',
    );
    assert.equal(attrs.steps[0].output.items.length, 10, 'the pages of both attempts are collected');
    assert.deepEqual([attrs.steps[0].attempt, attrs.steps[0].attempts], [2, 2]);
  });

  it("follows a Link header's next link", async () => {
    const before = lists().length;
    const { attrs } = await run([fetch(orders, { items: 'response.body.data', next: 'response.links.next.query' }, { limit: '4' })]);
    assert.equal(attrs.outcome, 'completed', JSON.stringify(attrs.steps));
    assert.deepEqual(
      lists()
        .slice(before)
        .map((p) => queryOf(p)),
      [{ limit: '4' }, { limit: '4', cursor: 'ord_0000000004' }, { limit: '4', cursor: 'ord_0000000008' }],
    );
    assert.equal(attrs.steps[0].output.items.length, 10);
    assert.equal(attrs.steps[0].output.pages, 3);
  });

  it('max_pages stops the list, and the output says where the next page is', async () => {
    const before = lists().length;
    const { attrs } = await run([fetch(orders, { ...BY_CURSOR, max_pages: 2 })]);
    assert.equal(attrs.outcome, 'completed', JSON.stringify(attrs.steps));
    assert.equal(lists().length - before, 2);
    const out = attrs.steps[0].output;
    assert.deepEqual([out.pages, out.items.length, out.next], [2, 4, { cursor: 'ord_0000000004' }]);
  });

  it('an offset from the page number', async () => {
    const before = lists().length;
    // The provider here pages by cursor only: the offset is sent as a query parameter, and the items repeat.
    const { attrs } = await run([fetch(orders, { items: 'response.body.data', next: "page < 3 ? {'offset': page * 2}", max_pages: 5 })]);
    assert.equal(attrs.outcome, 'completed', JSON.stringify(attrs.steps));
    assert.deepEqual(
      lists()
        .slice(before)
        .map((p) => queryOf(p).offset),
      [undefined, '2', '4'],
    );
  });

  it('refuses a paginate it cannot use at save, at its pointer', async () => {
    const r = await f.api.post(`${API}/workflows/save_builder_state`, {
      data: {
        type: 'workflow_builder_state',
        attributes: {
          is_new_version: false,
          organization_id: f.tenant.organizationId,
          wf_params: { name: 'Bad paging' },
          trigger_params: [],
          step_params: [fetch(orders, { ...BY_CURSOR, max_pages: 1001 })],
        },
      },
    });
    assert.equal(r.status, 422, r.text);
    assert.equal(r.body.errors[0].source.pointer, '/data/attributes/step_params/0/config/paginate/max_pages');
  });

  it('reads a Link header by rel', () => {
    assert.deepEqual(
      parseLinks(
        '<https://api.github.com/repositories/1/issues?page=2&per_page=50>; rel="next", <https://api.github.com/repositories/1/issues?page=9>; rel="last"',
      ),
      {
        next: { url: 'https://api.github.com/repositories/1/issues?page=2&per_page=50', query: { page: '2', per_page: '50' } },
        last: { url: 'https://api.github.com/repositories/1/issues?page=9', query: { page: '9' } },
      },
    );
    assert.deepEqual(parseLinks(undefined), {});
  });
});
