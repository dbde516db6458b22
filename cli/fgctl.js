#!/usr/bin/env node
// cli/fgctl.js: fgctl, fleetgate's command line, built on the TypeScript SDK (build/sdk/typescript):
// every call goes through the SDK's operations, so retries, typed errors and token handling are
// the SDK's. `make cli` installs build/bin/fgctl. Exit codes (EXIT below) are stable for scripts.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const YAML = require('yaml');
const sdk = require('../build/sdk/typescript');
const { Fleetgate, FleetgateError, ConnectionError } = sdk;

const EXIT = {
  ok: 0, error: 1, usage: 2, notFound: 3, denied: 4, rejected: 5, unavailable: 6, timeout: 7,
};

class UsageError extends Error {}

// ---- kinds: how each resource is listed, read, deleted and shown as a table -------------------

const age = (t) => {
  if (!t) return '<unknown>';
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(t)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
};
const reps = (o) => o?.status?.replicas ?? {};

const KINDS = {
  apps: {
    aliases: ['app', 'apps'], list: 'listApps', get: 'getApp', del: 'deleteApp', key: 'app', project: true,
    columns: [['NAME', (o) => o.name], ['READY', (o) => `${reps(o).ready ?? 0}/${o.spec?.replicas ?? 0}`],
      ['UP-TO-DATE', (o) => reps(o).updated ?? 0], ['AVAILABLE', (o) => reps(o).available ?? 0],
      ['PHASE', (o) => o.status?.phase ?? ''], ['CLUSTERS', (o) => (o.status?.clusters ?? []).length],
      ['AGE', (o) => age(o.createdAt)]],
  },
  pods: {
    aliases: ['pod', 'pods', 'po'], list: 'listPods', get: 'getPod', del: 'deletePod', key: 'pod', project: true,
    columns: [['NAME', (o) => o.name],
      ['READY', (o) => `${(o.containers ?? []).filter((c) => c.ready).length}/${(o.containers ?? []).length}`],
      ['STATUS', (o) => (o.deletingSince ? 'Terminating' : o.phase)],
      ['RESTARTS', (o) => (o.containers ?? []).reduce((n, c) => n + (c.restarts ?? 0), 0)],
      ['CLUSTER', (o) => o.cluster], ['NODE', (o) => o.node ?? '<none>'], ['AGE', (o) => age(o.createdAt)]],
  },
  jobsets: {
    aliases: ['jobset', 'jobsets', 'js'], list: 'listJobSets', get: 'getJobSet', del: 'deleteJobSet', key: 'jobset', project: true,
    columns: [['NAME', (o) => o.name], ['PHASE', (o) => o.status?.phase ?? ''],
      ['COMPLETIONS', (o) => `${o.status?.succeeded ?? 0}/${o.spec?.completions ?? ''}`], ['AGE', (o) => age(o.createdAt)]],
  },
  cronjobs: {
    aliases: ['cronjob', 'cronjobs', 'cj'], list: 'listCronJobs', get: 'getCronJob', del: 'deleteCronJob', key: 'cronjob', project: true,
    columns: [['NAME', (o) => o.name], ['SCHEDULE', (o) => o.spec?.schedule ?? ''],
      ['SUSPEND', (o) => String(o.spec?.suspend ?? false)], ['LAST SCHEDULE', (o) => (o.status?.lastScheduleAt ? age(o.status.lastScheduleAt) : '<none>')],
      ['AGE', (o) => age(o.createdAt)]],
  },
  scalers: {
    aliases: ['scaler', 'scalers', 'hpa'], list: 'listScalers', get: 'getScaler', del: 'deleteScaler', key: 'scaler', project: true,
    columns: [['NAME', (o) => o.name], ['APP', (o) => o.spec?.app ?? ''], ['MINPODS', (o) => o.spec?.minReplicas ?? ''],
      ['MAXPODS', (o) => o.spec?.maxReplicas ?? ''], ['REPLICAS', (o) => o.status?.currentReplicas ?? ''], ['AGE', (o) => age(o.createdAt)]],
  },
  projects: {
    aliases: ['project', 'projects', 'proj'], list: 'listProjects', get: 'getProject', del: 'deleteProject', key: 'project', project: false,
    columns: [['NAME', (o) => o.name], ['PHASE', (o) => o.phase ?? ''], ['CLUSTERS', (o) => (o.clusters ?? []).length],
      ['AGE', (o) => age(o.createdAt)]],
  },
  clusters: {
    aliases: ['cluster', 'clusters'], list: 'listClusters', get: 'getCluster', key: 'cluster', project: false,
    columns: [['NAME', (o) => o.name], ['REGION', (o) => o.region], ['ZONE', (o) => o.zone], ['HEALTH', (o) => o.health],
      ['NODES', (o) => `${o.capacity?.readyNodes ?? 0}/${o.capacity?.nodes ?? 0}`], ['PODS', (o) => o.capacity?.pods?.running ?? 0],
      ['VERSION', (o) => o.kubernetesVersion ?? '']],
  },
};
const EVENTS_COLUMNS = [['LAST SEEN', (o) => age(o.lastAt ?? o.time)], ['TYPE', (o) => o.type ?? ''],
  ['REASON', (o) => o.reason ?? ''], ['OBJECT', (o) => (o.object ? `${o.object.kind ?? ''}/${o.object.name ?? ''}` : o.name ?? '')],
  ['MESSAGE', (o) => o.message ?? '']];
const HISTORY_COLUMNS = [['TIME', (o) => o.time ?? ''], ['KIND', (o) => o.object?.kind ?? ''],
  ['NAME', (o) => o.object?.name ?? ''], ['CLUSTER', (o) => o.cluster ?? ''], ['CHANGE', (o) => o.change ?? ''],
  ['BY', (o) => o.actor ?? ''], ['SUMMARY', (o) => o.summary ?? '']];

function kindOf(word) {
  for (const [name, k] of Object.entries(KINDS)) if (k.aliases.includes(String(word).toLowerCase())) return [name, k];
  throw new UsageError(`unknown resource type "${word}"; one of: ${Object.keys(KINDS).join(', ')}`);
}

// ---- arguments -----------------------------------------------------------------------------

const FLAGS = { // flag: [name, takes a value]
  '-p': ['project', true], '--project': ['project', true], '-o': ['output', true], '--output': ['output', true],
  '-f': ['file', true], '--filename': ['file', true], '--replicas': ['replicas', true], '--wait': ['wait', false],
  '--timeout': ['timeout', true], '--follow': ['follow', false], '--tail': ['tail', true], '-c': ['container', true],
  '--container': ['container', true], '-i': ['stdin', false], '--stdin': ['stdin', false], '-t': ['tty', false],
  '--tty': ['tty', false], '-it': ['it', false], '--url': ['url', true], '--token': ['token', true],
  '--token-file': ['tokenFile', true], '--limit': ['limit', true], '--cluster': ['cluster', true],
  '-l': ['selector', true], '--selector': ['selector', true], '--since': ['since', true], '-h': ['help', false],
  '--help': ['help', false], '--kinds': ['kinds', true], '--app': ['app', true],
};

function parseArgs(argv) {
  const o = { _: [], rest: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { o.rest = argv.slice(i + 1); break; }
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const flag = eq > 0 ? a.slice(0, eq) : a;
    if (flag === '-f' && o._[0] === 'logs') { o.follow = true; continue; }
    const spec = FLAGS[flag];
    if (!spec) {
      if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown flag ${a}`);
      o._.push(a);
      continue;
    }
    if (spec[1]) {
      const v = eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      o[spec[0]] = v;
    } else o[spec[0]] = true;
  }
  if (o.it) { o.stdin = true; o.tty = true; }
  return o;
}

// ---- configuration and the client ------------------------------------------------------------

const configPath = () => process.env.FGCTL_CONFIG ||
  path.join(process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config'), 'fgctl', 'config.json');

function loadConfig() {
  try { return JSON.parse(fs.readFileSync(configPath(), 'utf8')); } catch { return {}; }
}

function client(o) {
  const cfg = loadConfig();
  const baseUrl = o.url || process.env.FLEETGATE_URL || cfg.url;
  if (!baseUrl) throw new UsageError('no server: set FLEETGATE_URL or run `fgctl login --url URL --token TOKEN`');
  let token = process.env.FLEETGATE_TOKEN || cfg.token;
  const tokenFile = process.env.FLEETGATE_TOKEN ? undefined : cfg.tokenFile;
  // a token file is read again when the server refuses the token (it may have been renewed)
  const provider = tokenFile ? Fleetgate.refreshingToken(() => fs.readFileSync(tokenFile, 'utf8')) : token;
  if (!provider) throw new UsageError('no token: set FLEETGATE_TOKEN or run `fgctl login`');
  return new Fleetgate({ baseUrl, token: provider });
}

function project(o, k = { project: true }) {
  if (!k.project) return undefined;
  const p = o.project || process.env.FLEETGATE_PROJECT || loadConfig().project;
  if (!p) throw new UsageError('no project: pass -p/--project NAME (or set FLEETGATE_PROJECT)');
  return p;
}

// ---- output ----------------------------------------------------------------------------------

function table(columns, rows) {
  const cells = [columns.map((c) => c[0]), ...rows.map((r) => columns.map((c) => String(c[1](r) ?? '')))];
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] + 3))).join('').trimEnd()).join('\n') + '\n';
}

function output(o, value, columns, emptyWhat) {
  const fmt = o.output || 'table';
  if (fmt === 'json') process.stdout.write(JSON.stringify(value, null, 2) + '\n');
  else if (fmt === 'yaml') process.stdout.write(YAML.stringify(value));
  else if (fmt === 'table' || fmt === 'wide') {
    const rows = Array.isArray(value.items) ? value.items : [value];
    if (rows.length === 0) process.stderr.write(`No ${emptyWhat} found.\n`);
    else process.stdout.write(table(columns, rows));
  } else if (fmt === 'name') {
    for (const r of Array.isArray(value.items) ? value.items : [value]) process.stdout.write(`${r.name}\n`);
  } else throw new UsageError(`-o ${fmt}: one of table, json, yaml, name`);
}

// ---- commands --------------------------------------------------------------------------------

async function listAll(fg, op, opts) {
  const items = [];
  for await (const page of fg.pages(op, opts)) items.push(...page.data.items);
  return { items };
}

async function cmdGet(o) {
  const [, word, name] = o._;
  if (!word) throw new UsageError('usage: fgctl get KIND [NAME] [-p PROJECT] [-o table|json|yaml]');
  const [kname, k] = kindOf(word);
  const fg = client(o);
  const p = project(o, k);
  const pathArgs = k.project ? { project: p } : {};
  if (name) {
    const r = await fg.ops[k.get]({ path: { ...pathArgs, [k.key]: name } });
    return output(o, r.data, k.columns, kname);
  }
  const query = {};
  if (o.limit) query.limit = Number(o.limit);
  if (o.selector) query.labelSelector = o.selector;
  const list = o.limit ? (await fg.ops[k.list]({ path: pathArgs, query })).data : await listAll(fg, k.list, { path: pathArgs, query });
  output(o, o.output === 'json' || o.output === 'yaml' ? { items: list.items } : list, k.columns,
    k.project ? `${kname} in project ${p}` : kname);
}

async function cmdDescribe(o) {
  const [, word, name] = o._;
  if (!word || !name) throw new UsageError('usage: fgctl describe KIND NAME [-p PROJECT]');
  const [, k] = kindOf(word);
  const fg = client(o);
  const p = project(o, k);
  const r = await fg.ops[k.get]({ path: { ...(k.project ? { project: p } : {}), [k.key]: name } });
  // kubectl's describe reads as indented key: value lines; YAML is exactly that
  const lines = YAML.stringify(r.data).split('\n').map((l) => l.replace(/^(\s*)(\S[^:]*):/, (m, ind, key) =>
    `${ind}${key.charAt(0).toUpperCase()}${key.slice(1)}:`));
  process.stdout.write(lines.join('\n'));
}

function readManifest(file) {
  const text = file === '-' ? fs.readFileSync(0, 'utf8') : fs.readFileSync(file, 'utf8');
  let doc;
  try {
    doc = /^\s*[{[]/.test(text) ? JSON.parse(text) : YAML.parse(text);
  } catch (e) {
    throw new UsageError(`${file}: not JSON or YAML (${e.message.split('\n')[0]})`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new UsageError(`${file}: the manifest must be one object`);
  return doc;
}

const CREATE = { App: ['createApp', 'apps'], Project: ['createProject', 'projects'], JobSet: ['createJobSet', 'jobsets'],
  CronJob: ['createCronJob', 'cronjobs'], Scaler: ['createScaler', 'scalers'] };

async function cmdCreate(o) {
  if (!o.file) throw new UsageError('usage: fgctl create -f FILE.json|FILE.yaml [-p PROJECT] [--wait]');
  const doc = readManifest(o.file);
  const kind = doc.kind ?? 'App';
  delete doc.kind;
  const c = CREATE[kind];
  if (!c) throw new UsageError(`${o.file}: kind ${kind}: one of ${Object.keys(CREATE).join(', ')}`);
  const fg = client(o);
  const k = KINDS[c[1]];
  const r = await fg.ops[c[0]]({ path: k.project ? { project: project(o, k) } : {}, body: doc });
  process.stdout.write(`${k.aliases[0]}/${r.data.name} created\n`);
  if (o.wait && kind === 'App') await waitApp(fg, o, r.data.name);
}

async function waitApp(fg, o, name) {
  const p = project(o);
  const deadline = Date.now() + (o.timeout ? parseDuration(o.timeout) : 300000);
  const tty = process.stderr.isTTY;
  let last = '';
  for (;;) {
    const app = (await fg.ops.getApp({ path: { project: p, app: name } })).data;
    const want = app.spec?.replicas ?? 0;
    const r = reps(app);
    const line = `waiting for app/${name}: ${r.ready ?? 0}/${want} ready, ${r.updated ?? 0} up to date`;
    if (line !== last) { process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`); last = line; }
    if ((r.ready ?? 0) === want && (r.updated ?? 0) >= want && (r.desired ?? want) === want) {
      process.stderr.write(tty ? '\n' : '');
      process.stdout.write(`app/${name} rolled out (${want} ready)\n`);
      return;
    }
    if (Date.now() > deadline) {
      if (tty) process.stderr.write('\n');
      const e = new Error(`timed out waiting for app/${name} (${r.ready ?? 0}/${want} ready)`);
      e.exit = EXIT.timeout;
      throw e;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}

function parseDuration(s) {
  const m = /^(\d+)(ms|s|m)?$/.exec(s);
  if (!m) throw new UsageError(`--timeout ${s}: a duration like 90s or 2m`);
  return Number(m[1]) * ({ ms: 1, s: 1000, m: 60000 }[m[2] ?? 's']);
}

function appArg(o, usage) {
  let [, a, b] = o._;
  if (a && a.includes('/')) [a, b] = a.split('/');
  else if (a && ['app', 'apps'].includes(a)) a = b;
  else b = a;
  if (!b) throw new UsageError(usage);
  return b;
}

async function cmdScale(o) {
  const name = appArg(o, 'usage: fgctl scale app NAME --replicas N [--wait]');
  if (o.replicas === undefined || !/^\d+$/.test(o.replicas)) throw new UsageError('--replicas N is required (a whole number)');
  const fg = client(o);
  await fg.ops.scaleApp({ path: { project: project(o), app: name }, body: { replicas: Number(o.replicas) } });
  process.stdout.write(`app/${name} scaled\n`);
  if (o.wait) await waitApp(fg, o, name);
}

const VERBS = { pause: ['pauseApp', 'paused'], resume: ['resumeApp', 'resumed'], restart: ['restartApp', 'restarted'], stop: ['stopApp', 'stopped'] };

async function cmdVerb(o) {
  const verb = o._[0];
  const name = appArg(o, `usage: fgctl ${verb} app NAME [--wait]`);
  const fg = client(o);
  await fg.ops[VERBS[verb][0]]({ path: { project: project(o), app: name } });
  process.stdout.write(`app/${name} ${VERBS[verb][1]}\n`);
  if (o.wait) await waitApp(fg, o, name);
}

async function cmdDelete(o) {
  const [, word, name] = o._;
  if (!word || !name) throw new UsageError('usage: fgctl delete KIND NAME [-p PROJECT]');
  const [, k] = kindOf(word);
  if (!k.del) throw new UsageError(`${word} cannot be deleted`);
  const fg = client(o);
  await fg.ops[k.del]({ path: { ...(k.project ? { project: project(o, k) } : {}), [k.key]: name } });
  process.stdout.write(`${k.aliases[0]}/${name} deleted\n`);
}

async function cmdLogs(o) {
  const target = o._[1];
  if (!target) throw new UsageError('usage: fgctl logs [-f] [--tail N] [-c CONTAINER] pod/NAME|app/NAME');
  const [kind, name] = target.includes('/') ? target.split('/') : ['pod', target];
  const fg = client(o);
  const query = {};
  if (o.follow) query.follow = true;
  if (o.tail !== undefined) query.tailLines = Number(o.tail);
  if (o.container) query.container = o.container;
  if (o.since) query.sinceSeconds = Math.round(parseDuration(o.since) / 1000);
  const p = project(o);
  const stream = ['app', 'apps'].includes(kind)
    ? await fg.appLogs({ path: { project: p, app: name }, query })
    : ['pod', 'pods', 'po'].includes(kind) ? await fg.podLogs({ path: { project: p, pod: name }, query })
      : (() => { throw new UsageError(`logs: ${kind}/: pod/NAME or app/NAME`); })();
  process.on('SIGINT', () => { stream.close(); process.exit(0); });
  for await (const line of stream) process.stdout.write(`${line}\n`);
}

async function cmdExec(o) {
  const pod = o._[1];
  if (!pod || o.rest.length === 0) throw new UsageError('usage: fgctl exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARGS...]');
  const fg = client(o);
  const tty = Boolean(o.tty && process.stdin.isTTY);
  const query = { command: o.rest, stdout: true, stderr: !tty, stdin: Boolean(o.stdin), tty };
  if (o.container) query.container = o.container;
  const s = await fg.exec({ path: { project: project(o), pod }, query },
    { onStdout: (b) => process.stdout.write(b), onStderr: (b) => process.stderr.write(b) });
  if (o.stdin) {
    if (tty) {
      process.stdin.setRawMode(true);
      const size = () => s.resize(process.stdout.columns || 80, process.stdout.rows || 24);
      size();
      process.stdout.on('resize', size);
    }
    process.stdin.on('data', (d) => s.write(d));
    process.stdin.on('end', () => s.closeStdin());
    process.stdin.resume();
  }
  const res = await s.done;
  if (tty) process.stdin.setRawMode(false);
  process.stdin.pause();
  process.exitCode = res.exitCode < 0 ? EXIT.error : res.exitCode;
}

async function cmdInsight(o, op, columns, what) {
  const fg = client(o);
  const p = project(o);
  const list = await listAll(fg, op, { path: { project: p } });
  output(o, list, columns, `${what} in project ${p}`);
}

async function cmdWatch(o) {
  const fg = client(o);
  const query = {};
  if (o.kinds) query.kinds = o.kinds.split(',');
  if (o.app) query.app = o.app;
  const stream = fg.changes({ path: { project: project(o) }, query });
  process.on('SIGINT', () => { stream.close(); process.exit(0); });
  const fmt = o.output || 'table';
  for await (const ev of stream) {
    if (fmt === 'json') process.stdout.write(JSON.stringify(ev) + '\n');
    else process.stdout.write(`${ev.time ?? ''}\t${ev.type}\t${ev.kind ?? ''}\t${ev.name ?? ''}\n`);
  }
}

async function cmdLogin(o) {
  const cfg = loadConfig();
  if (o.url) cfg.url = o.url;
  if (o.project) cfg.project = o.project;
  if (o.tokenFile) { cfg.tokenFile = path.resolve(o.tokenFile); delete cfg.token; }
  else if (o.token || process.env.FLEETGATE_TOKEN) { cfg.token = o.token || process.env.FLEETGATE_TOKEN; delete cfg.tokenFile; }
  cfg.url ??= process.env.FLEETGATE_URL;
  if (!cfg.url || (!cfg.token && !cfg.tokenFile)) throw new UsageError('usage: fgctl login --url URL (--token TOKEN | --token-file FILE) [-p PROJECT]');
  // the token is checked before it is saved
  const who = (await new Fleetgate({ baseUrl: cfg.url, token: cfg.token ?? fs.readFileSync(cfg.tokenFile, 'utf8').trim() }).ops.getWhoami()).data;
  fs.mkdirSync(path.dirname(configPath()), { recursive: true, mode: 0o700 });
  const tmp = `${configPath()}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(cfg, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, configPath());
  process.stdout.write(`logged in to ${cfg.url} as ${who.subject}\n`);
}

const COMMANDS = ['get', 'describe', 'create', 'scale', 'pause', 'resume', 'restart', 'stop', 'delete', 'logs',
  'exec', 'events', 'history', 'watch', 'login', 'completion', 'version', 'help'];

function completion(shell) {
  const kinds = Object.keys(KINDS).join(' ');
  const flags = Object.keys(FLAGS).filter((f) => f.startsWith('--')).join(' ');
  if (shell === 'bash') {
    return `# fgctl bash completion: source <(fgctl completion bash)
_fgctl() {
  local cur prev words cword
  cur="\${COMP_WORDS[COMP_CWORD]}"; prev="\${COMP_WORDS[COMP_CWORD-1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then COMPREPLY=($(compgen -W "${COMMANDS.join(' ')}" -- "$cur")); return; fi
  case "$prev" in
    get|describe|delete) COMPREPLY=($(compgen -W "${kinds}" -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -W "table json yaml name" -- "$cur")); return ;;
    -f|--filename) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return ;;
  esac
  case "$cur" in -*) COMPREPLY=($(compgen -W "${flags} -p -o -f -c -i -t -it" -- "$cur")); return ;; esac
}
complete -F _fgctl fgctl
`;
  }
  if (shell === 'zsh') {
    return `#compdef fgctl
# fgctl zsh completion: source <(fgctl completion zsh)
_fgctl() {
  local -a commands kinds outputs
  commands=(${COMMANDS.join(' ')})
  kinds=(${kinds})
  outputs=(table json yaml name)
  if (( CURRENT == 2 )); then compadd -a commands; return; fi
  case "\${words[CURRENT-1]}" in
    get|describe|delete) compadd -a kinds; return ;;
    -o|--output) compadd -a outputs; return ;;
    -f|--filename) _files; return ;;
    completion) compadd bash zsh; return ;;
  esac
  if [[ "\${words[CURRENT]}" == -* ]]; then compadd -- ${flags} -p -o -f -c -i -t -it; fi
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then _fgctl "$@"; else compdef _fgctl fgctl; fi
`;
  }
  throw new UsageError('usage: fgctl completion bash|zsh');
}

const HELP = `fgctl: the fleetgate command line (API ${sdk.SPEC_VERSION})

  fgctl login --url URL (--token TOKEN | --token-file FILE) [-p PROJECT]
  fgctl get KIND [NAME] [-p PROJECT] [-o table|json|yaml|name] [-l SELECTOR] [--limit N]
  fgctl describe KIND NAME [-p PROJECT]
  fgctl create -f FILE.json|FILE.yaml [-p PROJECT] [--wait]
  fgctl scale app NAME --replicas N [--wait] [--timeout 2m]
  fgctl pause|resume|restart|stop app NAME [--wait]
  fgctl delete KIND NAME
  fgctl logs [-f] [--tail N] [-c CONTAINER] pod/NAME|app/NAME
  fgctl exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARGS...]
  fgctl events|history [-p PROJECT] [-o ...]
  fgctl watch [-p PROJECT] [--kinds Pod,App] [--app NAME] [-o json]
  fgctl completion bash|zsh

KIND: ${Object.keys(KINDS).join(', ')}. The server and token come from FLEETGATE_URL and FLEETGATE_TOKEN,
else from what \`fgctl login\` saved (${configPath()}).
Exit codes: 0 ok, 1 error, 2 usage, 3 not found, 4 unauthorized or forbidden, 5 rejected (conflict,
precondition, invalid), 6 unavailable (5xx, 429 after retries, no connection), 7 --wait timed out;
exec exits with the command's own code.
`;

async function main(argv) {
  const o = parseArgs(argv);
  const cmd = o._[0];
  if (!cmd || cmd === 'help' || o.help) { process.stdout.write(HELP); return; }
  switch (cmd) {
    case 'get': return cmdGet(o);
    case 'describe': return cmdDescribe(o);
    case 'create': return cmdCreate(o);
    case 'scale': return cmdScale(o);
    case 'pause': case 'resume': case 'restart': case 'stop': return cmdVerb(o);
    case 'delete': return cmdDelete(o);
    case 'logs': return cmdLogs(o);
    case 'exec': return cmdExec(o);
    case 'events': return cmdInsight(o, 'listEvents', EVENTS_COLUMNS, 'events');
    case 'history': return cmdInsight(o, 'listHistory', HISTORY_COLUMNS, 'history');
    case 'watch': return cmdWatch(o);
    case 'login': return cmdLogin(o);
    case 'completion': process.stdout.write(completion(o._[1])); return undefined;
    case 'version': process.stdout.write(`fgctl ${sdk.SPEC_VERSION} (API ${sdk.SPEC_VERSION})\n`); return undefined;
    default: throw new UsageError(`unknown command "${cmd}"; see fgctl help`);
  }
}

function exitFor(e) {
  if (e instanceof UsageError) return EXIT.usage;
  if (e.exit) return e.exit;
  if (e instanceof ConnectionError) return EXIT.unavailable;
  if (e instanceof FleetgateError) {
    if (e.status === 404) return EXIT.notFound;
    if (e.status === 401 || e.status === 403) return EXIT.denied;
    if ([400, 405, 409, 412, 415, 422].includes(e.status)) return EXIT.rejected;
    if (e.status === 429 || e.status >= 500) return EXIT.unavailable;
  }
  return EXIT.error;
}

main(process.argv.slice(2)).catch((e) => {
  let msg = `error: ${e.message}`;
  if (e instanceof FleetgateError) for (const f of e.errors) msg += `\n  ${f.pointer ?? f.field ?? ''}: ${f.detail ?? f.message ?? JSON.stringify(f)}`;
  process.stderr.write(`${msg}\n`);
  process.exitCode = exitFor(e);
});
