/**
 * The echo agent (runtime/echo-agent.ts) on the real NATS: a request on dev.request.echo is
 * answered on the request's reply inbox and on dev.response.echo with {pong, timestamp, agent:
 * "echo-v1"}, tied to the request by `in_reply_to`; a malformed request is refused and counted
 * without stopping the agent; with no echo agent, a request fails saying nobody answers.
 */
import type { Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BusRequestError, type Bus, type BusMessage } from '../../runtime/bus.js';
import { startEchoAgent } from '../../runtime/echo-agent.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('echo');
let agentBus: Bus;
let client: Bus;
let agent: Subscription;
beforeAll(async () => {
  [agentBus, client] = await Promise.all([testBus(root), testBus(root)]);
  agent = startEchoAgent(agentBus);
  await agentBus.flush();
});
afterAll(async () => {
  await cleanupBus(client);
  await cleanupBus(agentBus);
});

describe('echo round trip', () => {
  it('answers on the reply inbox and on dev.response.echo', async () => {
    const published: BusMessage[] = [];
    const watch = client.on(client.subjects.devResponse('echo'), 'EchoResponse', (m) => void published.push(m));
    await client.flush();
    const before = Date.now();
    const answer = await client.request(
      client.subjects.devRequest('echo'),
      'EchoRequest',
      { ping: 'hello' },
      { expect: 'EchoResponse', timeoutMs: 3000 },
    );
    expect(answer.payload).toEqual({ pong: 'hello', timestamp: expect.any(String), agent: 'echo-v1' });
    expect(Date.parse(answer.payload.timestamp)).toBeGreaterThanOrEqual(before - 1000);
    expect(answer.header).toMatchObject({
      message_type: 'EchoResponse',
      schema: { generation: 1, version: '1.0' },
      in_reply_to: expect.any(String),
    });
    await until(() => published.length === 1, 'the response on dev.response.echo');
    expect(published[0]!.payload).toEqual(answer.payload);
    expect(published[0]!.header.in_reply_to).toBe(answer.header.in_reply_to);
    watch.unsubscribe();
  });

  it('a malformed request is refused and counted; the agent goes on answering', async () => {
    client.nc.publish(
      client.subjects.devRequest('echo'),
      JSON.stringify({ header: { nope: 1 }, payload: { ping: 'x' } }),
    );
    await until(() => agentBus.rejections.total === 1, 'the refusal');
    expect(agentBus.rejections.snapshot().byReason).toEqual({ bad_header: 1 });
    const again = await client.request(
      client.subjects.devRequest('echo'),
      'EchoRequest',
      { ping: 'still there?' },
      { expect: 'EchoResponse' },
    );
    expect(again.payload.pong).toBe('still there?');
  });

  it('with no echo agent a request fails saying nobody answers', async () => {
    agent.unsubscribe();
    await agentBus.flush();
    const err = await client
      .request(
        client.subjects.devRequest('echo'),
        'EchoRequest',
        { ping: 'anyone?' },
        { expect: 'EchoResponse', timeoutMs: 2000 },
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BusRequestError);
    expect(err).toMatchObject({ kind: 'no_responders', message: `nobody answers on ${root}.dev.request.echo` });
  });
});
