/**
 * The templates a new workflow starts from in the console, as workflow files (the YAML of
 * `workflow get --yaml`). docs/console.md shows each one as it is here (a test compares them),
 * so this is the one place to change them. Nested steps (switch cases, for_each) are written
 * as `steps:` is: a map of key: {type, ...config}.
 */
export interface WorkflowTemplate {
  id: string;
  title: string;
  summary: string;
  yaml: string;
}

export const WORKFLOW_TEMPLATES: WorkflowTemplate[] = [
  {
    id: 'github-router',
    title: 'GitHub router',
    summary: 'One webhook for a GitHub repository: push, issues and the rest each to their own steps, on the X-GitHub-Event header.',
    yaml: `name: GitHub router
description: One GitHub webhook; each event type to its own steps.
is_active: true
triggers:
  github:
    type: webhook
steps:
  route:
    type: switch
    cases:
      - when: delivery.headers."x-github-event" = "push"
        steps:
          pushed:
            type: transform
            expression: '{"repository": payload.repository.full_name, "commits": $count(payload.commits)}'
      - when: delivery.headers."x-github-event" = "issues"
        steps:
          issue:
            type: transform
            expression: '{"action": payload.action, "number": payload.issue.number, "title": payload.issue.title}'
    default:
      other:
        type: transform
        expression: '{"ignored": delivery.headers."x-github-event"}'
`,
  },
  {
    id: 'stripe-payments',
    title: 'Stripe payment to facts',
    summary: 'A Stripe webhook: each succeeded payment stored as a fact of the data model payments (create it first).',
    yaml: `name: Stripe payments
description: Each succeeded Stripe payment as a fact of the data model payments.
is_active: true
triggers:
  stripe:
    type: webhook
steps:
  succeeded:
    type: condition
    expression: payload.type = "payment_intent.succeeded"
  payment:
    type: transform
    expression: |-
      {
        "payment_id": payload.data.object.id,
        "amount": payload.data.object.amount / 100,
        "currency": payload.data.object.currency,
        "customer": payload.data.object.customer
      }
  store:
    type: write_fact
    data_model_slug: payments
    data: steps.payment
`,
  },
  {
    id: 'scheduled-sync',
    title: 'Scheduled sync',
    summary: 'Every hour, the orders created since the last run, page after page, each stored as a fact; the cursor kept in the state.',
    yaml: `name: Orders sync
description: Every hour, the orders created since the last run, each stored as a fact of orders.
is_active: true
triggers:
  hourly:
    type: schedule
    cron: 0 * * * *
steps:
  fetch:
    type: http_request
    connector_id: 00000000-0000-0000-0000-000000000000
    operation_ref: listOrders
    params:
      limit: "100"
      cursor: state.cursor
    paginate:
      items: response.body.data
      next: "response.body.next_cursor ? { 'cursor': response.body.next_cursor }"
      max_pages: 20
  each:
    type: for_each
    items: steps.fetch.items
    concurrency: 5
    steps:
      store:
        type: write_fact
        data_model_slug: orders
        data: '{"order_id": item.id, "amount": $number(item.total.amount)}'
  remember:
    type: set_state
    value: "{ 'cursor': steps.fetch.last.body.end_cursor ? steps.fetch.last.body.end_cursor : state.cursor }"
`,
  },
];
