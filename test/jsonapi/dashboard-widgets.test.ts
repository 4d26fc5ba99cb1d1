/**
 * POST and PATCH of dashboard_widgets (docs/api.md, "Dashboard widgets"; docs/console.md,
 * "Dashboards"): an admin or owner with api_write places and changes widgets, a member is
 * 403, api_read alone is 403; kind, position and config are checked with pointers; another
 * workspace's data model reads as no data model at all, another workspace's widget as 404;
 * the admin API (`tributary widget create`) runs the same check. The examples of
 * docs/console.md are the widgets placed here.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { adminCall, appWithTenant, assertJsonApiError, jsonApi, seedAccount, seedTenant, tokenFor } from '../helpers/app.ts';
import { checkConfig, checkPosition } from '../../src/resources/dashboard_widgets/config.ts';
import { AppError } from '../../src/errors.ts';

const API = '/api/json/v1';
const { t, tenant, api } = await appWithTenant();

async function model(client = api, slug = `orders-${process.pid}`): Promise<string> {
  const r = await client.post(`${API}/data_models`, { data: { type: 'data_model', attributes: { name: 'Orders', slug } } });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id;
}

const modelId = await model();
const widgetDoc = (attrs: Record<string, unknown>, id?: string) => ({ data: { type: 'dashboard_widget', ...(id ? { id } : {}), attributes: attrs } });
const place = (attrs: Record<string, unknown>, client = api) => client.post(`${API}/dashboard_widgets`, widgetDoc({ data_model_id: modelId, ...attrs }));

/** The widgets docs/console.md shows, in the order it shows them: a ```json block after a "<!-- widget -->" line. */
function docWidgets(): Array<Record<string, unknown>> {
  const doc = fs.readFileSync(path.resolve(import.meta.dirname, '..', '..', 'docs', 'console.md'), 'utf8');
  return [...doc.matchAll(/<!-- widget -->\n```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1]!) as Record<string, unknown>);
}

describe('POST and PATCH', () => {
  it('places each widget docs/console.md shows, and reads it back as written', async () => {
    const widgets = docWidgets();
    assert.ok(widgets.length >= 4, 'docs/console.md shows a widget of each kind');
    assert.deepEqual([...new Set(widgets.map((w) => w.kind))].sort(), ['bar', 'line', 'number', 'table']);
    for (const w of widgets) {
      const r = await place(w);
      assert.equal(r.status, 201, r.text);
      assert.equal(r.headers.get('location'), `${API}/dashboard_widgets/${r.body.data.id}`);
      const read = await api.get(`${API}/dashboard_widgets/${r.body.data.id}`);
      assert.equal(read.status, 200);
      for (const k of ['kind', 'title', 'dashboard', 'position', 'config']) assert.deepEqual(read.body.data.attributes[k], w[k], `${k} of ${String(w.title)}`);
      assert.equal(read.body.data.attributes.data_model_id, modelId);
    }
  });

  it('defaults the dashboard, position and config; PATCH moves, resizes and reconfigures', async () => {
    const r = await place({ kind: 'number', title: 'Entities' });
    assert.equal(r.status, 201, r.text);
    const a = r.body.data.attributes;
    assert.equal(a.dashboard, 'home');
    assert.deepEqual(a.position, { x: 0, y: 0, w: 4, h: 3 });
    assert.deepEqual(a.config, {});
    const id = r.body.data.id;
    const moved = await api.patch(`${API}/dashboard_widgets/${id}`, widgetDoc({ position: { x: 8, y: 2, w: 4, h: 2 } }, id));
    assert.equal(moved.status, 200, moved.text);
    assert.deepEqual(moved.body.data.attributes.position, { x: 8, y: 2, w: 4, h: 2 });
    assert.equal(moved.body.data.attributes.kind, 'number');
    // A new kind is checked with the stored config: a line needs a bucket, which the config gives here.
    const line = await api.patch(
      `${API}/dashboard_widgets/${id}`,
      widgetDoc({ kind: 'line', config: { mode: 'timeline', bucket: 'day', window: 'P30D' } }, id),
    );
    assert.equal(line.status, 200, line.text);
    assert.deepEqual(line.body.data.attributes.config, { mode: 'timeline', bucket: 'day', window: 'P30D' });
    const bad = await api.patch(`${API}/dashboard_widgets/${id}`, widgetDoc({ kind: 'number' }, id));
    assertJsonApiError(bad, 422, 'invalid_request', { pointer: '/data/attributes/config/bucket' });
    const unchanged = await api.get(`${API}/dashboard_widgets/${id}`);
    assert.equal(unchanged.body.data.attributes.kind, 'line');
  });

  it('refuses a bad kind, position or config with a pointer to it', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ kind: 'pie' }, '/data/attributes/kind'],
      [{ kind: 'table', position: { x: 10, y: 0, w: 4, h: 2 } }, '/data/attributes/position/w'],
      [{ kind: 'table', position: { x: 0, y: 0, w: 0, h: 2 } }, '/data/attributes/position/w'],
      [{ kind: 'table', position: { x: 1.5, y: 0, w: 2, h: 2 } }, '/data/attributes/position/x'],
      [{ kind: 'table', position: { x: 0, y: -1, w: 2, h: 2 } }, '/data/attributes/position/y'],
      [{ kind: 'table', position: { x: 0, y: 0, w: 2, h: 2, z: 1 } }, '/data/attributes/position/z'],
      [{ kind: 'table', config: { colour: '#fff' } }, '/data/attributes/config/colour'],
      [{ kind: 'table', config: { mode: 'history' } }, '/data/attributes/config/mode'],
      [{ kind: 'table', config: { window: '90 days' } }, '/data/attributes/config/window'],
      [{ kind: 'table', config: { window: 'P400D' } }, '/data/attributes/config/window'],
      [{ kind: 'table', config: { filters: [{ field: 'status', op: 'like', value: 'x' }] } }, '/data/attributes/config/filters/0/op'],
      [{ kind: 'table', config: { filters: Array.from({ length: 21 }, () => ({ field: 'a', op: 'eq', value: 1 })) } }, '/data/attributes/config/filters'],
      [{ kind: 'table', config: { groupBy: ['a', 'b', 'c', 'd'] } }, '/data/attributes/config/groupBy'],
      [{ kind: 'table', config: { measures: [{ op: 'sum' }] } }, '/data/attributes/config/measures/0/field'],
      [{ kind: 'table', config: { measures: [{ op: 'count', field: 'amount' }] } }, '/data/attributes/config/measures/0/field'],
      [{ kind: 'table', config: { measures: [{ op: 'count' }, { op: 'count' }] } }, '/data/attributes/config/measures'],
      [{ kind: 'table', config: { orderBy: [{ by: 'sum_amount' }] } }, '/data/attributes/config/orderBy/0/by'],
      [{ kind: 'table', config: { limit: 10_001 } }, '/data/attributes/config/limit'],
      [{ kind: 'table', config: { timezone: 'Mars/Olympus' } }, '/data/attributes/config/timezone'],
      [{ kind: 'table', config: { colors: ['red'] } }, '/data/attributes/config/colors/0'],
      [{ kind: 'table', config: { measure: 'avg_amount' } }, '/data/attributes/config/measure'],
      [{ kind: 'table', config: { mode: 'timeline', joinDataModelSlug: 'customers' } }, '/data/attributes/config/joinDataModelSlug'],
      [{ kind: 'table', config: { series: true, bucket: 'day' } }, '/data/attributes/config/window'],
      [{ kind: 'table', config: { series: true, bucket: 'minute', window: 'P2D' } }, '/data/attributes/config/bucket'],
      [{ kind: 'number', config: { groupBy: ['status'] } }, '/data/attributes/config/groupBy'],
      [{ kind: 'line', config: { groupBy: ['status'] } }, '/data/attributes/config/bucket'],
      [{ kind: 'bar', config: {} }, '/data/attributes/config/groupBy'],
      [{ kind: 'table', config: [] }, '/data/attributes/config'],
    ];
    for (const [attrs, pointer] of cases) {
      const r = await place(attrs);
      assertJsonApiError(r, 422, 'invalid_request', { pointer });
    }
    assertJsonApiError(await api.post(`${API}/dashboard_widgets`, widgetDoc({ kind: 'table' })), 422, 'invalid_request', {
      pointer: '/data/attributes/data_model_id',
    });
  });

  it('allows an admin or owner with api_write; a member and api_read alone are 403', async () => {
    const adminApi = jsonApi(t, await tokenFor(t, await seedAccount(t.deps, tenant, { role: 'admin' })));
    const member = await seedAccount(t.deps, tenant, { role: 'member' });
    const memberApi = jsonApi(t, await tokenFor(t, member));
    const readOnly = jsonApi(t, await tokenFor(t, tenant, 'api_read'));
    const byAdmin = await place({ kind: 'table', title: 'By an admin' }, adminApi);
    assert.equal(byAdmin.status, 201, byAdmin.text);
    const id = byAdmin.body.data.id;
    assertJsonApiError(await place({ kind: 'table' }, memberApi), 403, 'forbidden');
    assertJsonApiError(await memberApi.patch(`${API}/dashboard_widgets/${id}`, widgetDoc({ title: 'Mine' }, id)), 403, 'forbidden');
    assert.equal((await place({ kind: 'table' }, readOnly)).status, 403);
    assert.equal((await readOnly.patch(`${API}/dashboard_widgets/${id}`, widgetDoc({ title: 'Mine' }, id))).status, 403);
    // A member still reads them: the console draws the dashboards for everyone.
    assert.equal((await memberApi.get(`${API}/dashboard_widgets/${id}`)).status, 200);
  });

  it("reads another workspace's data model as none and its widget as 404", async () => {
    const other = await seedTenant(t.deps);
    const otherApi = jsonApi(t, await tokenFor(t, other));
    const otherModel = await model(otherApi, `theirs-${process.pid}`);
    const theirs = await otherApi.post(`${API}/dashboard_widgets`, widgetDoc({ data_model_id: otherModel, kind: 'table' }));
    assert.equal(theirs.status, 201, theirs.text);
    const id = theirs.body.data.id;
    const foreign = await place({ kind: 'table', data_model_id: otherModel });
    const absent = await place({ kind: 'table', data_model_id: '01890000-0000-7000-8000-000000000000' });
    assertJsonApiError(foreign, 422, 'invalid_request', { pointer: '/data/attributes/data_model_id' });
    assert.equal(foreign.body.errors[0].detail, absent.body.errors[0].detail);
    const patched = await api.patch(`${API}/dashboard_widgets/${id}`, widgetDoc({ title: 'Taken' }, id));
    assertJsonApiError(patched, 404, 'not_found');
    const unknown = '01890000-0000-7000-8000-000000000001';
    assert.equal(
      (await api.patch(`${API}/dashboard_widgets/${unknown}`, widgetDoc({ title: 'x' }, unknown))).body.errors[0].detail,
      patched.body.errors[0].detail,
    );
    // Nor can a widget of ours move onto their model.
    const ours = await place({ kind: 'table' });
    const moved = await api.patch(`${API}/dashboard_widgets/${ours.body.data.id}`, widgetDoc({ data_model_id: otherModel }, ours.body.data.id));
    assertJsonApiError(moved, 422, 'invalid_request', { pointer: '/data/attributes/data_model_id' });
    assert.equal((await otherApi.get(`${API}/dashboard_widgets/${id}`)).body.data.attributes.title, null);
  });
});

describe('the admin API runs the same check', () => {
  it('refuses what the JSON:API refuses, at its own pointers, and takes a config', async () => {
    const base = { workspace_id: tenant.workspaceId, data_model_id: modelId };
    const kpi = await adminCall(t, 'POST', '/widgets', { ...base, kind: 'kpi' });
    assert.equal(kpi.status, 422, kpi.text);
    assert.equal(kpi.body.errors[0].source.pointer, '/kind');
    const wide = await adminCall(t, 'POST', '/widgets', { ...base, kind: 'table', position: { x: 6, y: 0, w: 8, h: 2 } });
    assert.equal(wide.body.errors[0].source.pointer, '/position/w');
    const line = await adminCall(t, 'POST', '/widgets', { ...base, kind: 'line', config: { mode: 'timeline' } });
    assert.equal(line.body.errors[0].source.pointer, '/config/bucket');
    const ok = await adminCall(t, 'POST', '/widgets', { ...base, kind: 'line', dashboard: 'ops', config: { mode: 'timeline', bucket: 'day', window: 'P7D' } });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(ok.body.data.config, { mode: 'timeline', bucket: 'day', window: 'P7D' });
  });

  it('checkConfig and checkPosition keep what they accept as given (a round trip changes nothing)', () => {
    for (const w of docWidgets()) {
      assert.deepEqual(checkConfig(w.config, w.kind as 'table', '/config'), w.config ?? {});
      assert.deepEqual(checkPosition(w.position, '/position'), w.position);
    }
    assert.throws(
      () => checkPosition({ x: 11, y: 0, w: 2, h: 1 }, '/p'),
      (e: unknown) => e instanceof AppError && e.source?.pointer === '/p/w',
    );
  });
});
