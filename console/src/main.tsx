/** The console's entry: sign in, then the pages of the signed-in workspace. */
import { render } from 'preact';
import { useState } from 'preact/hooks';
import './styles.css';
import { SessionContext } from './api.ts';
import { signIn, type Session } from './session.ts';
import { href, useRoute, type Route } from './router.ts';
import { ErrorNotice, Field } from './ui/index.tsx';
import { RunsPage } from './pages/runs.tsx';
import { RunPage } from './pages/run.tsx';
import { WorkflowsPage } from './pages/workflows.tsx';
import { WorkflowPage } from './pages/workflow.tsx';
import { NewWorkflowPage } from './pages/workflow-new.tsx';
import { FactsPage } from './pages/facts.tsx';
import { ConnectorsPage } from './pages/connectors.tsx';
import { ConnectorPage } from './pages/connector.tsx';
import { ApiSpecPage } from './pages/api-spec.tsx';
import { DashboardsPage } from './pages/dashboards.tsx';

const NAV = [
  { section: 'runs', label: 'Runs' },
  { section: 'workflows', label: 'Workflows' },
  { section: 'facts', label: 'Facts' },
  { section: 'dashboards', label: 'Dashboards' },
  { section: 'connectors', label: 'Connectors' },
] as const;

function SignIn(props: { onSignedIn: (s: Session) => void }) {
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    setBusy(true);
    setError(undefined);
    try {
      props.onSignedIn(await signIn(String(form.get('client_id') ?? '').trim(), String(form.get('client_secret') ?? '')));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin" id="main">
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Tributary console</h1>
        <p class="muted">Sign in with a service account's client credentials. The token stays in this tab's memory; reloading signs you out.</p>
        <Field label="Client id">
          <input name="client_id" autoComplete="username" required spellcheck={false} />
        </Field>
        <Field label="Client secret">
          <input name="client_secret" type="password" autoComplete="current-password" required />
        </Field>
        <ErrorNotice error={error} title="Could not sign in" />
        <button type="submit" disabled={busy} aria-busy={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

function Content(props: { route: Route }) {
  const [section = 'runs', id] = props.route.parts;
  switch (section) {
    case 'runs':
      return id ? <RunPage id={id} /> : <RunsPage query={props.route.query} />;
    case 'workflows':
      if (id === 'new') return <NewWorkflowPage query={props.route.query} />;
      return id ? <WorkflowPage id={id} query={props.route.query} /> : <WorkflowsPage />;
    case 'facts':
      return <FactsPage model={id} query={props.route.query} />;
    case 'dashboards':
      return <DashboardsPage dashboard={id} />;
    case 'connectors':
      return id ? <ConnectorPage id={id} /> : <ConnectorsPage />;
    case 'api-specs':
      return id ? <ApiSpecPage id={id} /> : <ConnectorsPage />;
    default:
      return (
        <section class="page">
          <h1>Not found</h1>
          <p>
            There is no page at this address. <a href={href('runs')}>Go to the runs.</a>
          </p>
        </section>
      );
  }
}

function Shell(props: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const section = route.parts[0] ?? 'runs';
  return (
    <SessionContext.Provider value={props.session}>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Tributary</span>
        <nav aria-label="Sections">
          {NAV.map((n) => (
            <a href={href(n.section)} aria-current={section === n.section || (n.section === 'connectors' && section === 'api-specs') ? 'page' : undefined}>
              {n.label}
            </a>
          ))}
        </nav>
        <div class="who">
          <span title={props.session.workspace.id}>
            Workspace <strong data-testid="workspace-name">{props.session.workspace.name}</strong>
          </span>
          <span class="muted small">as {props.session.accountName}</span>
          <button type="button" class="secondary" onClick={props.onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Content route={route} />
      </main>
    </SessionContext.Provider>
  );
}

function App() {
  const [session, setSession] = useState<Session | null>(null);
  if (!session) return <SignIn onSignedIn={setSession} />;
  return <Shell session={session} onSignOut={() => setSession(null)} />;
}

render(<App />, document.getElementById('app')!);
