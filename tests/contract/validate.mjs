// tests/contract/validate.mjs: checks one HTTP answer against the contract (api/openapi.yaml).
//
//   node tests/contract/validate.mjs --method GET --path /v1/projects/shop/pods --status 200 \
//        [--content-type application/json] [--headers RAW] [--spec api/openapi.yaml] < body
//
// Finds the operation whose path template matches the concrete path (query string ignored; a
// `{param}` matches one segment without ':', `{param}:verb` a segment ending in the verb), picks the
// response for the status (exact, then 2XX-style, then `default`), and checks the body against its
// schema: JSON bodies are parsed and validated, event streams have each data line validated, other
// text bodies are validated as strings. With --headers (a raw header block, "Name: value" lines)
// the declared required headers must be present and every declared header present must match its
// schema; its Content-Type is used when --content-type is absent. A 405 on a known path and a 404 on
// an unknown path are checked as problem documents. Exit 0: valid; 1: not valid (reasons on
// stderr); 2: usage error, unknown route or method.
import { loadSpec, makeAjv, compileAt, deref, ptr, formatErrors } from './spec.mjs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

function usage(msg) {
    console.error(`validate: ${msg}`);
    console.error('usage: validate.mjs --method M --path P --status N [--content-type T] [--headers RAW] [--spec FILE] < body');
    process.exit(2);
}

const opts = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    if (!['--method', '--path', '--status', '--content-type', '--headers', '--spec'].includes(k)) usage(`unknown option ${k}`);
    if (i + 1 >= argv.length) usage(`${k} needs a value`);
    opts[k.slice(2)] = argv[i + 1];
}
if (!opts.method || !opts.path || !opts.status) usage('--method, --path and --status are required');
if (!/^[1-5][0-9][0-9]$/.test(opts.status)) usage(`--status must be a 3-digit HTTP status (got ${opts.status})`);
const method = opts.method.toLowerCase();
const status = opts.status;
const path = opts.path.split('?')[0];
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const doc = loadSpec(opts.spec || join(root, 'api', 'openapi.yaml'), join(root, 'build', 'openapi', 'cache'));
const ajv = makeAjv(doc);

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const body = Buffer.concat(chunks);

/* Raw header block -> lower-case name -> value (the last one wins; status lines are skipped). */
const headers = new Map();
if (opts.headers !== undefined) {
    for (const line of opts.headers.split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i <= 0 || /^HTTP\//.test(line)) continue;
        headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
    }
}
const contentType = opts['content-type'] ?? headers.get('content-type');

function templateRegex(tpl) {
    const segs = tpl.split('/').slice(1).map((seg) => {
        const m = /^\{([^}]+)\}(:.+)?$/.exec(seg);
        if (!m) return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        return '[^/:]+' + (m[2] ? m[2].replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : '');
    });
    return new RegExp('^/' + segs.join('/') + '$');
}

const problems = [];
function fail(msg) {
    problems.push(msg);
}

/* The response object for the status, with the pointer of its content. */
let response, responsePointer, routeName;
const templates = Object.keys(doc.paths || {}).filter((t) => templateRegex(t).test(path));
/* Prefer the template with the most literal characters (a literal beats a parameter). */
templates.sort((a, b) => b.replace(/\{[^}]+\}/g, '').length - a.replace(/\{[^}]+\}/g, '').length);
if (templates.length === 0) {
    if (status !== '404') usage(`no path template of the contract matches ${path}`);
    routeName = `(no route) ${path}`;
    response = { content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
    responsePointer = null;
} else {
    const tpl = templates[0];
    const op = doc.paths[tpl][method];
    routeName = `${opts.method.toUpperCase()} ${tpl}`;
    if (!op) {
        if (status !== '405') usage(`${opts.method.toUpperCase()} is not an operation of ${tpl}`);
        response = { content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
        responsePointer = null;
        if (opts.headers !== undefined && !headers.has('allow')) fail('a 405 answer must carry Allow');
    } else {
        const rs = op.responses || {};
        const key = [status, `${status[0]}XX`, `${status[0]}xx`, 'default'].find((k) => k in rs);
        if (!key) {
            fail(`status ${status} is not documented for ${routeName} (documented: ${Object.keys(rs).join(', ')})`);
        } else {
            const raw = rs[key];
            response = deref(doc, raw);
            responsePointer = raw.$ref ? raw.$ref.slice(1) : `/paths/${ptr(tpl)}/${method}/responses/${ptr(key)}`;
        }
    }
}

function baseType(t) {
    return String(t).split(';')[0].trim().toLowerCase();
}

if (response) {
    /* Headers. */
    if (opts.headers !== undefined) {
        for (const [name, h0] of Object.entries(response.headers || {})) {
            const h = deref(doc, h0);
            const v = headers.get(name.toLowerCase());
            if (v === undefined) {
                if (h.required) fail(`header ${name} is required and missing`);
                continue;
            }
            if (!h.schema) continue;
            const s = deref(doc, h.schema);
            const val = (s.type === 'integer' || s.type === 'number') && /^-?[0-9]+(\.[0-9]+)?$/.test(v) ? Number(v) : v;
            const validate = ajv.compile({ $ref: `urn:fleetgate:openapi#${h0.$ref ? h0.$ref.slice(1) + '/schema' : responsePointer ? `${responsePointer}/headers/${ptr(name)}/schema` : ''}` });
            if (!validate(val)) fail(`header ${name}: ${JSON.stringify(v)}\n${formatErrors(validate.errors)}`);
        }
    }
    /* Body. */
    const content = response.content || {};
    const types = Object.keys(content);
    if (types.length === 0) {
        if (body.length > 0 && status !== '101') fail(`${routeName} ${status} has no body in the contract, got ${body.length} bytes`);
    } else {
        let mtName;
        if (contentType === undefined) {
            if (types.length === 1) mtName = types[0];
            else usage(`${routeName} ${status} has several media types (${types.join(', ')}); give --content-type`);
        } else {
            mtName = types.find((t) => t.toLowerCase().replace(/\s+/g, '') === contentType.toLowerCase().replace(/\s+/g, ''))
                  ?? types.find((t) => baseType(t) === baseType(contentType));
            if (!mtName) fail(`Content-Type ${contentType} is not one of ${types.join(', ')} for ${routeName} ${status}`);
        }
        if (mtName) {
            const mt = content[mtName];
            const schemaPtr = responsePointer ? `${responsePointer}/content/${ptr(mtName)}/schema` : '/components/schemas/Problem';
            const bt = baseType(mtName);
            const text = body.toString('utf8');
            if (bt === 'application/json' || bt.endsWith('+json')) {
                let value;
                try {
                    value = JSON.parse(text);
                } catch (e) {
                    fail(`the body is not JSON: ${e.message}`);
                }
                if (value !== undefined) {
                    const validate = compileAt(ajv, schemaPtr);
                    if (!validate(value)) fail(`the body does not match ${schemaPtr}\n${formatErrors(validate.errors)}`);
                }
            } else if (bt === 'text/event-stream' && mt.schema && mt.schema['x-fleetgate-event-data']) {
                const target = mt.schema['x-fleetgate-event-data'].$ref.slice(1);
                const validate = compileAt(ajv, target);
                text.split('\n').filter((l) => l.startsWith('data:')).forEach((l, i) => {
                    let v;
                    try {
                        v = JSON.parse(l.slice(5).trim());
                    } catch (e) {
                        fail(`event data line ${i + 1} is not JSON: ${e.message}`);
                        return;
                    }
                    if (!validate(v)) fail(`event data line ${i + 1} does not match ${target}\n${formatErrors(validate.errors)}`);
                });
            } else {
                const validate = compileAt(ajv, schemaPtr);
                if (!validate(text)) fail(`the body does not match ${schemaPtr}\n${formatErrors(validate.errors)}`);
            }
        }
    }
}

if (problems.length) {
    console.error(`${routeName} ${status}: not as the contract says:\n${problems.join('\n')}`);
    process.exit(1);
}
process.exit(0);
