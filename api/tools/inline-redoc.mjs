// api/tools/inline-redoc.mjs: makes the page `redocly build-docs` wrote self-contained, so /docs
// works where no CDN can be reached: the <script src=".../redoc.standalone.js"> that build-docs
// emits is replaced by the same bundle from node_modules/redoc (the version build-docs rendered with).
//
//   node api/tools/inline-redoc.mjs IN.html OUT.html
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';

const [input, output] = process.argv.slice(2);
if (!input || !output) {
    console.error('usage: inline-redoc.mjs IN.html OUT.html');
    process.exit(2);
}
/* redoc is a dependency of @redocly/cli; resolve it from there so the versions agree. */
const require = createRequire(require_base());
function require_base() {
    return createRequire(import.meta.url).resolve('@redocly/cli/package.json');
}
const bundlePath = require.resolve('redoc/bundles/redoc.standalone.js');
const bundle = readFileSync(bundlePath, 'utf8');
if (/<\/script/i.test(bundle)) {
    console.error(`${bundlePath}: contains </script, cannot be inlined`);
    process.exit(1);
}
const html = readFileSync(input, 'utf8');
const re = /<script src="https:\/\/[^"]*\/redoc\.standalone\.js"><\/script>/g;
const found = html.match(re) || [];
if (found.length !== 1) {
    console.error(`${input}: expected one redoc.standalone.js script tag, found ${found.length}`);
    process.exit(1);
}
const out = html.replace(re, () => `<script>${bundle}</script>`);
if (/https?:\/\/(cdn|fonts)\./.test(out.replace(bundle, ''))) {
    console.error(`${input}: still loads something from a CDN`);
    process.exit(1);
}
writeFileSync(`${output}.tmp`, out);
renameSync(`${output}.tmp`, output);
console.log(`docs: ${output} (${Math.round(out.length / 1024)} KiB, self-contained)`);
