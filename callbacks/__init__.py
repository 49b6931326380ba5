"""Status callbacks: a service's webhook endpoints and the delivery of its event log to them.

A service registers endpoints (`/api/v1/webhooks`); a sweep of the scheduler finds the
endpoints with settled events past their cursor (eventlog, decision 110) and publishes one task
per endpoint on the `callbacks` queue, which its own worker pool consumes, so a slow or dead
receiver never holds up an email. A task POSTs batches signed as Standard Webhooks and moves
the endpoint's cursor only on a 2xx; failures back off for NOTIFIER_CALLBACKS_RETRY_HOURS, then
the endpoint is disabled (decision 113).
"""
