/**
 * The MCP bridge's programmatic face: `createBridge` (connect a session to any MCP transport)
 * and `startHttpBridge` (streamable HTTP on /mcp). See docs/mcp.md.
 */
export {
  createBridge,
  defaultBufferSize,
  maxBufferSize,
  type Bridge,
  type BridgeSessionHandle,
  type CreateBridgeOptions,
} from './server.js';
export { startHttpBridge, defaultMcpHttpPort, mcpPath, type HttpBridge, type StartHttpBridgeOptions } from './http.js';
export { BusLink, fixedBusSource, type BusSource, type BusState } from './bus-link.js';
export { defaultPublishAllow, PublishAllowList, resolveSubject, SubjectRefusedError } from './subjects.js';
export { BoundedBuffer } from './buffer.js';
export type { BufferedMessage, HeartbeatReport } from './session.js';
