// tests/contract/spec.mjs: loads api/openapi.yaml and compiles its schemas with Ajv (JSON Schema
// 2020-12, the dialect of OpenAPI 3.1). Shared by check-examples.mjs and validate.mjs.
//
// The whole document is registered as one schema resource under SPEC_ID, so any schema in it is
// compiled by its JSON Pointer (SPEC_ID#/components/schemas/App) and its internal $refs resolve.
import { readFileSync, writeFileSync, renameSync, mkdirSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { parse } from 'yaml';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

export const SPEC_ID = 'urn:fleetgate:openapi';

/* OpenAPI keywords that may sit inside a schema but mean nothing to JSON Schema validation. */
const OPENAPI_KEYWORDS = ['example', 'discriminator', 'xml', 'externalDocs', 'x-fleetgate-event-data'];

/* Parses the spec. With cacheDir, the parsed document is kept there as JSON, named by the hash of
 * the YAML text (parsing the YAML costs most of a check's time; a changed spec gets a new name). */
export function loadSpec(file, cacheDir) {
    const text = readFileSync(file, 'utf8');
    let cached;
    if (cacheDir) {
        cached = join(cacheDir, createHash('sha256').update(text).digest('hex').slice(0, 32) + '.json');
        try {
            return JSON.parse(readFileSync(cached, 'utf8'));
        } catch {
            /* not cached yet */
        }
    }
    const doc = parse(text, { maxAliasCount: 0, uniqueKeys: true });
    if (!doc || typeof doc !== 'object' || !String(doc.openapi || '').startsWith('3.1'))
        throw new Error(`${file}: not an OpenAPI 3.1 document`);
    if (cached) {
        try {
            mkdirSync(cacheDir, { recursive: true });
            const tmp = `${cached}.${process.pid}.tmp`;
            writeFileSync(tmp, JSON.stringify(doc));
            renameSync(tmp, cached);
        } catch {
            /* a cache that cannot be written only costs time */
        }
    }
    return doc;
}

export function makeAjv(doc) {
    const ajv = new Ajv2020({ strict: true, strictRequired: false, strictTypes: false, allErrors: true,
                              validateFormats: true });
    addFormats(ajv);
    for (const k of OPENAPI_KEYWORDS) ajv.addKeyword(k);
    /* The top-level OpenAPI members are not schema keywords either. */
    for (const k of ['openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'webhooks',
                     'jsonSchemaDialect'])
        ajv.addKeyword(k);
    ajv.addSchema({ ...doc, $id: SPEC_ID });
    return ajv;
}

/* Escapes one JSON Pointer token (RFC 6901). */
export function ptr(token) {
    return String(token).replace(/~/g, '~0').replace(/\//g, '~1');
}

/* Follows a local $ref ("#/components/...") in doc; returns the target, or throws. */
export function deref(doc, node) {
    let seen = 0;
    while (node && typeof node === 'object' && typeof node.$ref === 'string') {
        if (!node.$ref.startsWith('#/') || ++seen > 16) throw new Error(`unsupported $ref ${node.$ref}`);
        let cur = doc;
        for (const raw of node.$ref.slice(2).split('/')) {
            const t = raw.replace(/~1/g, '/').replace(/~0/g, '~');
            if (cur === undefined || cur === null || !(t in cur)) throw new Error(`unresolved $ref ${node.$ref}`);
            cur = cur[t];
        }
        node = cur;
    }
    return node;
}

/* Compiles the schema at a pointer of the document ("/components/schemas/App"). */
export function compileAt(ajv, pointer) {
    return ajv.compile({ $ref: `${SPEC_ID}#${pointer}` });
}

export function formatErrors(errors, max = 20) {
    const lines = [];
    for (const e of (errors || []).slice(0, max)) {
        const where = e.instancePath === '' ? '(the body)' : e.instancePath;
        let extra = '';
        if (e.keyword === 'additionalProperties') extra = `: ${JSON.stringify(e.params.additionalProperty)}`;
        else if (e.keyword === 'enum' || e.keyword === 'const')
            extra = `: ${JSON.stringify(e.params.allowedValues ?? e.params.allowedValue)}`;
        lines.push(`  ${where} ${e.message}${extra} [${e.schemaPath}]`);
    }
    if ((errors || []).length > max) lines.push(`  … and ${errors.length - max} more`);
    return lines.join('\n');
}
