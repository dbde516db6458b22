// sdk-gen/typescript/openapi-ts.config.mjs: @hey-api/openapi-ts's settings for the TypeScript SDK.
// The generated code (types, one function per operation, the fetch client) lands in
// build/sdk/typescript/src/gen and is never edited by hand; `make sdk` regenerates it.
import path from 'node:path';

export default {
  input: path.resolve(process.env.FG_SPEC || 'api/openapi.yaml'),
  output: { path: path.resolve(process.env.FG_SDK_TS_OUT || 'build/sdk/typescript/src/gen'), clean: true },
  plugins: ['@hey-api/typescript', '@hey-api/client-fetch', { name: '@hey-api/sdk' }],
};
