// tests/contract/check-examples.mjs: validates every example in the contract against its schema.
//
//   node tests/contract/check-examples.mjs [api/openapi.yaml]
//
// Checked: `examples` (and `example`) of every schema and subschema; the example(s) of every
// parameter, header and media type (request bodies and responses, inline or in components), each
// against the schema beside it; the `data` lines of text/event-stream examples against the schema
// named by x-fleetgate-event-data. Also required: every media type has at least one example, so
// that every operation's bodies are shown. Exit 0 when all hold, 1 otherwise.
import { loadSpec, makeAjv, compileAt, deref, ptr, formatErrors } from './spec.mjs';

const file = process.argv[2] || 'api/openapi.yaml';
const doc = loadSpec(file);
const ajv = makeAjv(doc);
const failures = [];
let checked = 0;

function at(pointer) {
    let cur = doc;
    for (const raw of pointer.split('/').slice(1)) cur = cur?.[raw.replace(/~1/g, '/').replace(/~0/g, '~')];
    return cur;
}

function check(schemaPointer, value, where) {
    let validate;
    try {
        validate = compileAt(ajv, schemaPointer);
    } catch (e) {
        failures.push(`${where}: the schema at ${schemaPointer} does not compile: ${e.message}`);
        return;
    }
    checked++;
    if (!validate(value)) failures.push(`${where}: does not match ${schemaPointer}\n${formatErrors(validate.errors)}`);
}

const MAP_KEYWORDS = ['properties', 'patternProperties', '$defs', 'dependentSchemas'];
const ONE_KEYWORDS = ['additionalProperties', 'items', 'not', 'if', 'then', 'else', 'propertyNames', 'contains',
                      'unevaluatedProperties', 'unevaluatedItems', 'contentSchema'];
const LIST_KEYWORDS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];

/* Validates the examples of the schema at pointer and of all its subschemas. */
function walkSchema(pointer) {
    const s = at(pointer);
    if (!s || typeof s !== 'object' || Array.isArray(s)) return;
    if (Array.isArray(s.examples)) s.examples.forEach((v, i) => check(pointer, v, `${pointer}/examples/${i}`));
    if ('example' in s) check(pointer, s.example, `${pointer}/example`);
    for (const k of MAP_KEYWORDS)
        if (s[k] && typeof s[k] === 'object') for (const n of Object.keys(s[k])) walkSchema(`${pointer}/${k}/${ptr(n)}`);
    for (const k of ONE_KEYWORDS) if (s[k] && typeof s[k] === 'object') walkSchema(`${pointer}/${k}`);
    for (const k of LIST_KEYWORDS) if (Array.isArray(s[k])) s[k].forEach((_, i) => walkSchema(`${pointer}/${k}/${i}`));
}

/* A parameter or header object: its example(s) against its schema. */
function walkParamLike(pointer) {
    const p = at(pointer);
    if (!p || p.$ref || !p.schema) return;
    walkSchema(`${pointer}/schema`);
    if ('example' in p) check(`${pointer}/schema`, p.example, `${pointer}/example`);
    for (const [n, ex] of Object.entries(p.examples || {})) check(`${pointer}/schema`, deref(doc, ex).value, `${pointer}/examples/${n}`);
}

const usedExamples = new Set();

function eventStreamCheck(pointer, mt, text, where) {
    const data = mt.schema && mt.schema['x-fleetgate-event-data'];
    if (!data) return;
    const target = data.$ref ? data.$ref.slice(1) : `${pointer}/schema/x-fleetgate-event-data`;
    const lines = String(text).split('\n').filter((l) => l.startsWith('data:'));
    if (lines.length === 0) failures.push(`${where}: an event-stream example without a data line`);
    lines.forEach((l, i) => {
        let v;
        try {
            v = JSON.parse(l.slice(5).trim());
        } catch (e) {
            failures.push(`${where}: data line ${i + 1} is not JSON: ${e.message}`);
            return;
        }
        check(target, v, `${where} (data line ${i + 1})`);
    });
}

/* A content map (media type -> media type object). */
function walkContent(pointer) {
    const content = at(pointer);
    for (const mtName of Object.keys(content || {})) {
        const mp = `${pointer}/${ptr(mtName)}`;
        const mt = content[mtName];
        if (!mt.schema) continue;
        walkSchema(`${mp}/schema`);
        let n = 0;
        if ('example' in mt) {
            n++;
            check(`${mp}/schema`, mt.example, `${mp}/example`);
            eventStreamCheck(mp, mt, mt.example, `${mp}/example`);
        }
        for (const [name, ex] of Object.entries(mt.examples || {})) {
            n++;
            if (ex.$ref) usedExamples.add(ex.$ref);
            const v = deref(doc, ex).value;
            check(`${mp}/schema`, v, `${mp}/examples/${name}`);
            eventStreamCheck(mp, mt, v, `${mp}/examples/${name}`);
        }
        if (n === 0) failures.push(`${mp}: no example`);
    }
}

function walkResponse(pointer) {
    const r = at(pointer);
    if (!r || r.$ref) return;
    for (const h of Object.keys(r.headers || {})) walkParamLike(`${pointer}/headers/${ptr(h)}`);
    if (r.content) walkContent(`${pointer}/content`);
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
let operations = 0;
for (const [p, item] of Object.entries(doc.paths || {})) {
    const pp = `/paths/${ptr(p)}`;
    (item.parameters || []).forEach((_, i) => walkParamLike(`${pp}/parameters/${i}`));
    for (const m of METHODS) {
        const op = item[m];
        if (!op) continue;
        operations++;
        const op_ = `${pp}/${m}`;
        (op.parameters || []).forEach((_, i) => walkParamLike(`${op_}/parameters/${i}`));
        if (op.requestBody && !op.requestBody.$ref) walkContent(`${op_}/requestBody/content`);
        for (const code of Object.keys(op.responses || {})) walkResponse(`${op_}/responses/${ptr(code)}`);
    }
}
const c = doc.components || {};
for (const n of Object.keys(c.schemas || {})) walkSchema(`/components/schemas/${ptr(n)}`);
for (const n of Object.keys(c.parameters || {})) walkParamLike(`/components/parameters/${ptr(n)}`);
for (const n of Object.keys(c.headers || {})) walkParamLike(`/components/headers/${ptr(n)}`);
for (const n of Object.keys(c.responses || {})) walkResponse(`/components/responses/${ptr(n)}`);
for (const n of Object.keys(c.requestBodies || {})) walkContent(`/components/requestBodies/${ptr(n)}/content`);
for (const n of Object.keys(c.examples || {}))
    if (!usedExamples.has(`#/components/examples/${ptr(n)}`))
        failures.push(`/components/examples/${n}: not used by any media type, so never validated`);

if (failures.length) {
    console.error(failures.join('\n'));
    console.error(`check-examples: ${failures.length} failed, ${checked} examples checked (${file})`);
    process.exit(1);
}
console.log(`check-examples: ${checked} examples valid in ${operations} operations (${file})`);
