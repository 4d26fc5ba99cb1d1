/** An OpenAPI 3.0 document of `n` trivial operations, as YAML or JSON text (the shape of issue 19's 30,000-operation upload). */
export function bigSpec(n: number, format: 'yaml' | 'json'): string {
  if (format === 'json') {
    const paths: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) paths[`/p${i}`] = { get: { operationId: `op${i}`, responses: { 200: { description: 'ok' } } } };
    return JSON.stringify({ openapi: '3.0.3', info: { title: 'Big', version: '1' }, paths });
  }
  const lines = ["openapi: 3.0.3\ninfo: {title: Big, version: '1'}\npaths:\n"];
  for (let i = 0; i < n; i++) lines.push(`  /p${i}:\n    get:\n      operationId: op${i}\n      responses: {'200': {description: ok}}\n`);
  return lines.join('');
}
