/**
 * A JSON:API list on screen a page at a time: its error, Loading until the first answer, the
 * table (or its empty state), and Previous/Next over the pages.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Collection, Page as ListPage, ResourceOf } from '@tributary/client';
import { useLoad } from '../api.ts';
import { ErrorNotice, Loading, Pager, Table, type Column } from './index.tsx';

/**
 * A list page by page: the first from `first`, then each `next` link; Previous goes back
 * through the pages already read, so nothing is asked twice.
 */
export function usePages<C extends Collection>(first: () => Promise<ListPage<C>>, deps: readonly unknown[]) {
  const loaded = useLoad(first, deps);
  const [later, setLater] = useState<ListPage<C>[]>([]);
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    setLater([]);
    setError(undefined);
  }, [loaded.data]);
  const page = later.at(-1) ?? loaded.data;
  const next =
    page && typeof page.links.next === 'string' && page.links.next !== ''
      ? () => {
          setError(undefined);
          page.next().then((p) => p && setLater((s) => [...s, p]), setError);
        }
      : undefined;
  const prev = later.length > 0 ? () => setLater((s) => s.slice(0, -1)) : undefined;
  return { page, number: later.length + 1, error: loaded.error ?? error, loading: loaded.loading, reload: loaded.reload, next, prev };
}

export interface PagedListProps<C extends Collection> {
  /** The first page; the list loads again when `deps` change. */
  load: () => Promise<ListPage<C>>;
  deps: readonly unknown[];
  errorTitle: string;
  /** The table's name for a screen reader; given the page's number when it depends on it. */
  caption: string | ((pageNumber: number) => string);
  /** The columns, or a function of the page when a cell reads its `included` resources. */
  columns: Column<ResourceOf<C>>[] | ((page: ListPage<C>) => Column<ResourceOf<C>>[]);
  /** What an empty list says. */
  empty: ComponentChildren;
  /** The pager's name (`Workflow pages`). */
  pagerLabel: string;
  /** Shown under the table, from the page on screen. */
  after?: (page: ListPage<C>) => ComponentChildren;
}

export function PagedList<C extends Collection>(props: PagedListProps<C>) {
  const list = usePages(props.load, props.deps);
  const { page } = list;
  return (
    <>
      <ErrorNotice error={list.error} title={props.errorTitle} />
      {page === undefined ? (
        list.loading && <Loading />
      ) : (
        <>
          <Table<ResourceOf<C>>
            caption={typeof props.caption === 'string' ? props.caption : props.caption(list.number)}
            // Every resource has an id; the generic type cannot say so for any C.
            rowKey={(r) => (r as { id: string }).id}
            rows={page.data}
            empty={props.empty}
            columns={typeof props.columns === 'function' ? props.columns(page) : props.columns}
          />
          {props.after?.(page)}
        </>
      )}
      <Pager onPrev={list.prev} onNext={list.next} label={props.pagerLabel} />
    </>
  );
}
