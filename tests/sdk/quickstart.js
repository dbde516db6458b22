// tests/sdk/quickstart.js: the TypeScript quick start of README.md, run live by make sdk-test-ts;
// the lines between the markers are the README's (tests/sdk/readme_check.sh keeps them equal).
'use strict';
process.chdir(require('path').join(__dirname, '../..'));
const main = async () => {
// quickstart:begin
// make sdk-ts   (writes build/sdk/typescript; FLEETGATE_URL and FLEETGATE_TOKEN name the server and your token)
const { Fleetgate, NotFoundError } = require(`${process.cwd()}/build/sdk/typescript`);

const fg = new Fleetgate({ onCall: (c) => console.error(`${c.method} ${c.url} ${c.status} ${c.durationMs.toFixed(1)} ms id=${c.requestId}`) });
const whoami = await fg.ops.getWhoami();
console.log(`hello ${whoami.data.subject}`);
let pods = 0;
for await (const pod of fg.paginate('listPods', { path: { project: 'demo' }, query: { limit: 100 } })) pods++;
console.log(`project demo runs ${pods} pods`);
try {
  await fg.ops.getApp({ path: { project: 'demo', app: 'no-such-app' } });
} catch (e) {
  if (e instanceof NotFoundError) console.log(`not found: ${e.detail} (request ${e.requestId})`);
}
// quickstart:end
};
main().catch((e) => { console.error(e); process.exit(1); });
