/**
 * The echo agent: the smallest thing that proves a round trip over the bus. It takes
 * `EchoRequest {ping}` on `<root>.dev.request.echo` and answers `EchoResponse {pong, timestamp,
 * agent: "echo-v1"}` on `<root>.dev.response.echo` and, when the request waits for it, on the
 * request's reply inbox.
 */
import type { Subscription } from '@nats-io/transport-node';
import type { Bus } from './bus.js';

const echoAgentName = 'echo-v1';

/**
 * Start answering echo requests; stop with the returned subscription's `unsubscribe()`.
 * Several echo agents share the requests (one NATS queue group), so each is answered once.
 */
export function startEchoAgent(bus: Bus): Subscription {
  const responses = bus.subjects.devResponse('echo');
  return bus.on(
    bus.subjects.devRequest('echo'),
    'EchoRequest',
    (m) => {
      const answer = { pong: m.payload.ping, timestamp: new Date().toISOString(), agent: echoAgentName } as const;
      bus.publish(responses, 'EchoResponse', answer, { inReplyTo: m.header.message_id });
      bus.respond(m, responses, 'EchoResponse', answer);
    },
    { queue: 'echo' },
  );
}
