/**
 * Numbered pages of a factQuery answer (pageNumber, lastPage, count), as links: each page has
 * an address to share, and a keyboard reaches every one with Tab.
 */
import { navigate } from '../router.ts';
import type { Answer } from './facts-query.tsx';

export const LIMITS = [10, 25, 50, 100, 250];

/** The page number and the limit the route asks for, within what factQuery accepts. */
export function pageFrom(query: URLSearchParams, defaultLimit = 50): { page: number; limit: number } {
  const page = Math.max(1, Math.floor(Number(query.get('page') ?? '1')) || 1);
  const asked = Math.floor(Number(query.get('limit') ?? String(defaultLimit))) || defaultLimit;
  return { page, limit: Math.min(250, Math.max(1, asked)) };
}

/** `route` is the view's address with some of its query changed (undefined drops a key). */
export function FactPager(props: { answer: Answer; route: (changes: Record<string, string | undefined>) => string; noun: string }) {
  const { pageNumber, lastPage, count, limit } = props.answer.page;
  const to = (p: number) => props.route({ page: String(p) });
  const around = [];
  for (let p = Math.max(1, pageNumber - 2); p <= Math.min(lastPage, pageNumber + 2); p++) around.push(p);
  const link = (p: number, text: string, label: string) =>
    p < 1 || p > lastPage || p === pageNumber ? (
      <span class="muted" aria-disabled="true">
        {text}
      </span>
    ) : (
      <a href={to(p)} aria-label={label}>
        {text}
      </a>
    );
  return (
    <div class="fact-pager">
      <p data-testid="fact-count">
        {count ?? '?'} {props.noun} · page {pageNumber} of {lastPage}
      </p>
      <nav aria-label="Pages of facts">
        <ul>
          <li>{link(1, '« First', 'First page')}</li>
          <li>{link(pageNumber - 1, '‹ Previous', 'Previous page')}</li>
          {around.map((p) => (
            <li>
              {p === pageNumber ? (
                <a aria-current="page" href={to(p)} aria-label={`Page ${p}`}>
                  {p}
                </a>
              ) : (
                <a href={to(p)} aria-label={`Page ${p}`}>
                  {p}
                </a>
              )}
            </li>
          ))}
          <li>{link(pageNumber + 1, 'Next ›', 'Next page')}</li>
          <li>{link(lastPage, 'Last »', 'Last page')}</li>
        </ul>
      </nav>
      <label class="inline-field">
        <span>Rows per page</span>
        <select value={String(limit)} onChange={(e) => navigate(props.route({ limit: (e.currentTarget as HTMLSelectElement).value, page: undefined }))}>
          {[...new Set([...LIMITS, limit])]
            .sort((a, b) => a - b)
            .map((l) => (
              <option value={String(l)}>{l}</option>
            ))}
        </select>
      </label>
    </div>
  );
}
