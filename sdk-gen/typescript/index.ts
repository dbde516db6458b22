// sdk-gen/typescript/index.ts: the TypeScript SDK's entry point (copied next to the generated code
// by `make sdk`): the runtime, and the generated types and functions as they are.
export * from './runtime/client.js';
export * from './runtime/errors.js';
export * from './runtime/transport.js';
export * from './runtime/streams.js';
export * from './runtime/exec.js';
export * as types from './gen/types.gen.js';
export * as operationFunctions from './gen/sdk.gen.js';
export { operations, SPEC_VERSION } from './meta.gen.js';
