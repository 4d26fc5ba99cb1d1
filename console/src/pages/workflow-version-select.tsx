/** A select of a workflow's saved versions, the current one marked. */
export function VersionSelect(props: { label: string; value: string; versions: number[]; current?: number; onChange: (v: string) => void; class?: string }) {
  return (
    <label class={props.class ?? 'field'}>
      <span class={props.class ? undefined : 'field-label'}>{props.label}</span>
      <select value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.versions.map((v) => (
          <option value={String(v)}>
            {v}
            {v === props.current ? ' (current)' : ''}
          </option>
        ))}
      </select>
    </label>
  );
}
