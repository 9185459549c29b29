#!/usr/bin/env node
// Offline validation of the Kubernetes manifests of a Kustomize base (no
// cluster needed). Run through deploy/k8s/validate.sh, which installs the npm
// packages (package.json, package-lock.json here) into a cache outside the
// repository and passes their directory in PS_K8S_DEPS_DIR.
//
//   node validate.js BASE_DIR
//
// Checks, in order:
//   1. the kustomization: it only lists resources; each exists once; no
//      other .yaml/.yml file lies in BASE_DIR;
//   2. each document of each listed file against the Kubernetes API schema of
//      its apiVersion/kind (kubernetes-models), and, when that passes, that
//      it has no field the schema does not know (the API server rejects
//      those; the schema alone lets them through);
//   3. what no schema can see: names and labels, selectors against pod
//      template labels, Services against the ports of the pods they select,
//      a StatefulSet's governing headless Service, probe ports, volumes,
//      ConfigMap references, $(VAR) and shell ${VAR} references;
//   4. the parameter server's own invariants (flags against replica counts,
//      Services and ports).
// Prints one line per object, then `k8s manifests: N objects valid`; exits
// 1 on any problem (each names its file and Kind/name), 2 on bad usage.
'use strict';

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

function usage(msg) {
  process.stderr.write(`validate.js: ${msg}\nusage: PS_K8S_DEPS_DIR=DIR node validate.js BASE_DIR\n`);
  process.exit(2);
}

if (process.argv.length !== 3) usage('expected exactly one argument, the Kustomize base directory');
const baseDir = path.resolve(process.argv[2]);
if (!fs.statSync(baseDir, { throwIfNoEntry: false })?.isDirectory()) usage(`${baseDir} is not a directory`);
const depsDir = process.env.PS_K8S_DEPS_DIR;
if (!depsDir || !fs.existsSync(path.join(depsDir, 'node_modules'))) {
  usage('PS_K8S_DEPS_DIR must name the directory holding node_modules (run deploy/k8s/validate.sh)');
}
const depsRequire = createRequire(path.join(depsDir, 'package.json'));
const YAML = depsRequire('yaml');
const kmVersion = depsRequire('kubernetes-models/package.json').version;

// ---------------------------------------------------------------------------
// Problems, kept per object (or per file for what precedes objects).

const objects = []; // {file, index, doc, apiVersion, kind, name, id, problems: []}
const fileProblems = []; // {where, msg}

function fail(obj, msg) {
  obj.problems.push(msg);
}

function rel(file) {
  return path.relative(baseDir, file) || path.basename(file);
}

// ---------------------------------------------------------------------------
// 1. The kustomization.

const ALLOWED_KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'metadata', 'resources']);

function walkYamlFiles(dir, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walkYamlFiles(p, out);
    else if (/\.ya?ml$/.test(entry.name)) out.push(p);
  }
  return out;
}

function readKustomization() {
  const kfile = path.join(baseDir, 'kustomization.yaml');
  const where = 'kustomization.yaml';
  const bad = (msg) => fileProblems.push({ where, msg });
  if (!fs.existsSync(kfile)) {
    bad(`missing (expected ${kfile})`);
    return [];
  }
  const doc = YAML.parseDocument(fs.readFileSync(kfile, 'utf8'), { version: '1.1', prettyErrors: true });
  if (doc.errors.length) {
    for (const e of doc.errors) bad(`YAML: ${e.message}`);
    return [];
  }
  const k = doc.toJS();
  if (!k || typeof k !== 'object' || Array.isArray(k)) {
    bad('is not a mapping');
    return [];
  }
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1') {
    bad(`apiVersion is ${JSON.stringify(k.apiVersion)}, expected kustomize.config.k8s.io/v1beta1`);
  }
  if (k.kind !== 'Kustomization') bad(`kind is ${JSON.stringify(k.kind)}, expected Kustomization`);
  for (const key of Object.keys(k)) {
    if (!ALLOWED_KUSTOMIZATION_KEYS.has(key)) {
      bad(`field '${key}' is not allowed: this validator checks the resources as written, so the base ` +
          `may only list them (no namespace, transformers or generators; put those in an overlay)`);
    }
  }
  if (!Array.isArray(k.resources) || k.resources.length === 0) {
    bad('resources must be a non-empty list of files');
    return [];
  }
  const files = [];
  const seen = new Set();
  for (const r of k.resources) {
    if (typeof r !== 'string') {
      bad(`resources entry ${JSON.stringify(r)} is not a file name`);
      continue;
    }
    const file = path.resolve(baseDir, r);
    if (!file.startsWith(baseDir + path.sep)) {
      bad(`resources entry '${r}' lies outside the base directory`);
      continue;
    }
    if (seen.has(file)) {
      bad(`resources entry '${r}' is listed twice`);
      continue;
    }
    seen.add(file);
    const st = fs.statSync(file, { throwIfNoEntry: false });
    if (!st) bad(`resources entry '${r}' does not exist`);
    else if (!st.isFile()) bad(`resources entry '${r}' is not a file`);
    else if (!/\.ya?ml$/.test(r)) bad(`resources entry '${r}' is not a .yaml/.yml file`);
    else files.push(file);
  }
  for (const f of walkYamlFiles(baseDir)) {
    if (f !== kfile && !seen.has(f)) bad(`${rel(f)} is not listed in resources (list it, or move it out of the base)`);
  }
  console.log(`kustomization: ${files.length} resource file(s) listed` +
              (fileProblems.length ? '' : ', all present, no unlisted YAML'));
  return files;
}

// ---------------------------------------------------------------------------
// 2. Parsing and schema validation.

function loadObjects(files) {
  for (const file of files) {
    // YAML 1.1, as Kubernetes reads it (`on`, `yes` are booleans there).
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'), { version: '1.1', prettyErrors: true });
    docs.forEach((d, index) => {
      const where = `${rel(file)} (document ${index + 1})`;
      if (d.errors.length) {
        for (const e of d.errors) fileProblems.push({ where, msg: `YAML: ${e.message.trim()}` });
        return;
      }
      const data = d.toJS();
      if (data === null || data === undefined) return; // an empty document (comments only)
      if (typeof data !== 'object' || Array.isArray(data)) {
        fileProblems.push({ where, msg: 'is not a mapping (a Kubernetes object)' });
        return;
      }
      const name = data.metadata && typeof data.metadata.name === 'string' ? data.metadata.name : '<no name>';
      const obj = {
        file: rel(file), index, doc: data, apiVersion: data.apiVersion, kind: data.kind, name,
        id: `${data.kind}/${name}`, problems: [],
      };
      objects.push(obj);
    });
  }
}

// The model class of an apiVersion/kind: kubernetes-models lays them out as
// kubernetes-models/<group>/<version>/<Kind> (core: v1/<Kind>).
function modelClass(apiVersion, kind) {
  if (typeof apiVersion !== 'string' || !/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion)) {
    return { error: `apiVersion ${JSON.stringify(apiVersion)} is missing or malformed` };
  }
  if (typeof kind !== 'string' || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) {
    return { error: `kind ${JSON.stringify(kind)} is missing or malformed` };
  }
  let mod;
  try {
    mod = depsRequire(`kubernetes-models/${apiVersion}/${kind}`);
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
  }
  const cls = mod && mod[kind];
  // Also rules out nested types (e.g. v1/PodSpec), which have no apiVersion/kind.
  if (!cls || cls.apiVersion !== apiVersion || cls.kind !== kind) {
    return { error: `unknown apiVersion/kind ${apiVersion} ${kind} (not in kubernetes-models ${kmVersion})` };
  }
  return { cls };
}

function jsonPointerToPath(p) {
  if (!p) return '(object)';
  return p.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^[0-9]+$/.test(s) ? `[${s}]` : `.${s}`)).join('').replace(/^\./, '');
}

// Runs the model's own validate() on a copy whose every object is wrapped in
// a Proxy recording which fields the schema's validator looked at. A field
// it never looked at, in an object it did look into, is unknown to the schema.
function validateAgainstSchema(obj) {
  const { cls, error } = modelClass(obj.apiVersion, obj.kind);
  if (error) {
    fail(obj, error);
    return;
  }
  const model = new cls(obj.doc);
  const looked = new WeakMap();
  const proxies = new WeakMap();
  const wrap = (target) => {
    if (target === null || typeof target !== 'object') return target;
    if (proxies.has(target)) return proxies.get(target);
    const keys = new Set();
    looked.set(target, keys);
    const proxy = new Proxy(target, {
      get(t, key, receiver) {
        if (typeof key === 'string') keys.add(key);
        return wrap(Reflect.get(t, key, receiver));
      },
      has(t, key) {
        if (typeof key === 'string') keys.add(key);
        return Reflect.has(t, key);
      },
    });
    proxies.set(target, proxy);
    return proxy;
  };
  try {
    cls.prototype.validate.call(wrap(model));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    const byPath = new Map();
    for (const err of e.errors) {
      const p = jsonPointerToPath(err.instancePath);
      let msg = err.message;
      if (err.keyword === 'enum' && err.params && err.params.allowedValues) {
        msg += `: ${err.params.allowedValues.join(', ')}`;
      }
      if (!byPath.has(p)) byPath.set(p, new Set());
      byPath.get(p).add(msg);
    }
    for (const [p, msgs] of byPath) fail(obj, `schema: ${p}: ${[...msgs].join('; ')}`);
  }
  const unknown = [];
  const walk = (v, p) => {
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${p}[${i}]`));
      return;
    }
    if (v === null || typeof v !== 'object') return;
    const keys = looked.get(v);
    if (!keys || keys.size === 0) return; // free-form, or never reached
    for (const k of Object.keys(v)) {
      const kp = p ? `${p}.${k}` : k;
      if (keys.has(k)) walk(v[k], kp);
      else unknown.push(kp);
    }
  };
  walk(model, '');
  for (const u of unknown) fail(obj, `schema: ${u}: unknown field (not in the ${obj.apiVersion} ${obj.kind} schema)`);
}

// ---------------------------------------------------------------------------
// 3. What the schema cannot see.

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

function checkName(obj) {
  const n = obj.doc.metadata && obj.doc.metadata.name;
  if (typeof n !== 'string' || n === '') {
    fail(obj, 'metadata.name is missing');
    return;
  }
  if (obj.kind === 'Service') {
    if (!DNS1035_LABEL.test(n) || n.length > 63) fail(obj, `metadata.name '${n}' is not a DNS-1035 label`);
  } else if (['StatefulSet', 'Job', 'Deployment', 'DaemonSet', 'CronJob', 'Pod'].includes(obj.kind)) {
    if (!DNS1123_LABEL.test(n) || n.length > 63) fail(obj, `metadata.name '${n}' is not a DNS-1123 label`);
  } else if (!DNS1123_SUBDOMAIN.test(n) || n.length > 253) {
    fail(obj, `metadata.name '${n}' is not a DNS-1123 subdomain`);
  }
  if (obj.doc.metadata.namespace !== undefined) {
    fail(obj, 'metadata.namespace is set: the base is namespace-agnostic (set it in an overlay or with -n)');
  }
}

function checkLabels(obj, labels, where) {
  if (!labels) return;
  for (const [k, v] of Object.entries(labels)) {
    const slash = k.lastIndexOf('/');
    const prefix = slash >= 0 ? k.slice(0, slash) : null;
    const name = slash >= 0 ? k.slice(slash + 1) : k;
    if ((prefix !== null && (!DNS1123_SUBDOMAIN.test(prefix) || prefix.length > 253)) ||
        !LABEL_NAME.test(name) || name.length > 63) {
      fail(obj, `${where}: label key '${k}' is invalid`);
    }
    if (typeof v === 'string' && v !== '' && (!LABEL_NAME.test(v) || v.length > 63)) {
      fail(obj, `${where}: label value '${v}' (key '${k}') is invalid`);
    }
  }
}

// The pod template of a workload: {labels, spec, at} or null.
function podTemplate(obj) {
  const d = obj.doc;
  const spec = d.spec || {};
  if (obj.kind === 'Pod') return { labels: (d.metadata && d.metadata.labels) || {}, spec, at: 'spec' };
  let t = null;
  let at = 'spec.template';
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'ReplicationController'].includes(obj.kind)) {
    t = spec.template;
  } else if (obj.kind === 'CronJob') {
    t = spec.jobTemplate && spec.jobTemplate.spec && spec.jobTemplate.spec.template;
    at = 'spec.jobTemplate.spec.template';
  }
  if (!t) return null;
  return { labels: (t.metadata && t.metadata.labels) || {}, spec: t.spec || {}, at: `${at}.spec` };
}

function selectorMatches(sel, labels) {
  if (!sel) return false;
  for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const vals = e.values || [];
    if (e.operator === 'In' && !(has && vals.includes(labels[e.key]))) return false;
    if (e.operator === 'NotIn' && has && vals.includes(labels[e.key])) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

function selectorIsEmpty(sel) {
  return !sel || (Object.keys(sel.matchLabels || {}).length === 0 && (sel.matchExpressions || []).length === 0);
}

function allContainers(spec) {
  return [...(spec.initContainers || []), ...(spec.containers || [])];
}

// A port reference (number or name) against a container's ports.
function portIn(container, ref) {
  return (container.ports || []).some((p) => (typeof ref === 'number' ? p.containerPort === ref : p.name === ref));
}

const SHELLS = new Set(['sh', 'bash', 'dash', '/bin/sh', '/bin/bash', '/bin/dash', '/usr/bin/bash']);
// Set by the container runtime or the shell itself.
const SHELL_PROVIDED = new Set(['HOSTNAME', 'HOME', 'PATH', 'PWD', 'IFS', 'PPID', 'UID', 'USER', 'SHELL', 'TERM']);

function checkPodSpec(obj, tpl, ctx) {
  const spec = tpl.spec;
  const at = tpl.at;
  const containers = allContainers(spec);
  const volumes = new Set((spec.volumes || []).map((v) => v.name));
  for (const c of ctx.claimTemplates) volumes.add(c);
  const usedVolumes = new Set();
  const cnames = new Set();
  const isIndexedJob = obj.kind === 'Job' && obj.doc.spec && obj.doc.spec.completionMode === 'Indexed';

  for (const c of containers) {
    const cw = `${at} container '${c.name}'`;
    if (!DNS1123_LABEL.test(c.name || '') || (c.name || '').length > 63) fail(obj, `${cw}: name is not a DNS-1123 label`);
    if (cnames.has(c.name)) fail(obj, `${cw}: container name used twice`);
    cnames.add(c.name);

    // Ports: IANA service names, unique names and numbers.
    const pnames = new Set();
    const pnums = new Set();
    for (const p of c.ports || []) {
      if (p.name !== undefined) {
        if (p.name.length > 15 || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(p.name) || !/[a-z]/.test(p.name) ||
            p.name.includes('--')) {
          fail(obj, `${cw}: port name '${p.name}' is not a valid IANA service name (<= 15 chars, a-z0-9-)`);
        }
        if (pnames.has(p.name)) fail(obj, `${cw}: port name '${p.name}' used twice`);
        pnames.add(p.name);
      }
      const key = `${p.containerPort}/${p.protocol || 'TCP'}`;
      if (pnums.has(key)) fail(obj, `${cw}: containerPort ${key} declared twice`);
      pnums.add(key);
    }

    // Probes must target a port the container declares.
    for (const kind of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      const pr = c[kind];
      if (!pr) continue;
      for (const h of ['httpGet', 'tcpSocket', 'grpc']) {
        if (!pr[h]) continue;
        const ref = pr[h].port;
        if (!portIn(c, ref)) {
          const what = typeof ref === 'number' ? `port ${ref}` : `port name '${ref}'`;
          fail(obj, `${cw}: ${kind}.${h} targets ${what}, which is not among the container's ports ` +
                    `(${(c.ports || []).map((p) => (p.name ? `${p.name}=${p.containerPort}` : p.containerPort)).join(', ') || 'none'})`);
        }
      }
    }
    if (kindIsLongRunning(obj) && c.readinessProbe === undefined && (spec.containers || []).includes(c)) {
      fail(obj, `${cw}: no readinessProbe`);
    }

    // Volumes: every mount names a volume (or claim template), once per path.
    const paths = new Set();
    for (const m of c.volumeMounts || []) {
      if (!volumes.has(m.name)) fail(obj, `${cw}: volumeMount '${m.name}' names no volume or volumeClaimTemplate`);
      usedVolumes.add(m.name);
      if (paths.has(m.mountPath)) fail(obj, `${cw}: mountPath ${m.mountPath} mounted twice`);
      paths.add(m.mountPath);
    }

    // Environment: valid names, existing ConfigMaps/keys.
    const env = new Set();
    const checkCmRef = (ref, where) => {
      if (!ref || ref.optional) return;
      const cm = ctx.configMaps.get(ref.name);
      if (!cm) fail(obj, `${cw}: ${where} names ConfigMap '${ref.name}', which is not in the base`);
      else if (ref.key !== undefined && !Object.prototype.hasOwnProperty.call(cm.data || {}, ref.key)) {
        fail(obj, `${cw}: ${where} names key '${ref.key}', which ConfigMap '${ref.name}' lacks`);
      }
    };
    for (const e of c.env || []) {
      if (!ENV_NAME.test(e.name)) fail(obj, `${cw}: env name '${e.name}' is invalid`);
      if (env.has(e.name)) fail(obj, `${cw}: env '${e.name}' set twice`);
      if (typeof e.value === 'string') checkVarRefs(obj, cw, `env ${e.name}`, e.value, env, isIndexedJob);
      if (e.valueFrom) checkCmRef(e.valueFrom.configMapKeyRef, `env ${e.name}`);
      env.add(e.name);
    }
    for (const ef of c.envFrom || []) checkCmRef(ef.configMapRef, 'envFrom');
    if (isIndexedJob) env.add('JOB_COMPLETION_INDEX');

    // $(VAR) in command/args: Kubernetes leaves unknown ones as they are.
    const argv = [...(c.command || []), ...(c.args || [])];
    argv.forEach((a, i) => checkVarRefs(obj, cw, `command/args[${i}]`, a, env, isIndexedJob));
    // ${VAR} in a `sh -c` script.
    if (argv.length >= 3 && SHELLS.has(argv[0]) && argv[1] === '-c') checkShellRefs(obj, cw, argv[2], env);
  }
  for (const v of spec.volumes || []) {
    if (!usedVolumes.has(v.name)) fail(obj, `${at}: volume '${v.name}' is mounted by no container`);
    if (v.configMap && !v.configMap.optional && !ctx.configMaps.has(v.configMap.name)) {
      fail(obj, `${at}: volume '${v.name}' names ConfigMap '${v.configMap.name}', which is not in the base`);
    }
  }
  for (const c of ctx.claimTemplates) {
    if (!usedVolumes.has(c)) fail(obj, `volumeClaimTemplate '${c}' is mounted by no container`);
  }
}

function kindIsLongRunning(obj) {
  return ['StatefulSet', 'Deployment', 'DaemonSet'].includes(obj.kind);
}

function checkVarRefs(obj, cw, where, s, env, isIndexedJob) {
  const re = /\$\$|\$\(([^)]*)\)/g;
  let m;
  while ((m = re.exec(s)) !== null) {
    if (m[0] === '$$') continue; // an escaped $
    const v = m[1];
    if (!env.has(v)) {
      const hint = v === 'JOB_COMPLETION_INDEX' && !isIndexedJob ? ' (only Indexed Jobs set it)' : '';
      fail(obj, `${cw}: ${where} refers to $(${v}), which is not an env var of the container${hint}`);
    }
  }
}

function checkShellRefs(obj, cw, script, env) {
  const assigned = new Set();
  for (const m of script.matchAll(/(?:^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)=/g)) assigned.add(m[1]);
  for (const m of script.matchAll(/\b(?:for|read)\s+([A-Za-z_][A-Za-z0-9_]*)/g)) assigned.add(m[1]);
  const seen = new Set();
  for (const m of script.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)|\$([A-Za-z_][A-Za-z0-9_]*)/g)) {
    const v = m[1] || m[2];
    if (seen.has(v)) continue;
    seen.add(v);
    if (!env.has(v) && !assigned.has(v) && !SHELL_PROVIDED.has(v)) {
      fail(obj, `${cw}: the shell script uses \${${v}}, which is neither an env var of the container nor set by it`);
    }
  }
}

function checkCrossReferences() {
  const byKind = (k) => objects.filter((o) => o.kind === k);
  const configMaps = new Map(byKind('ConfigMap').map((o) => [o.name, o.doc]));
  const services = new Map(byKind('Service').map((o) => [o.name, o]));
  const workloads = objects.map((o) => ({ obj: o, tpl: podTemplate(o) })).filter((w) => w.tpl);

  // Unique names per kind.
  const ids = new Set();
  for (const o of objects) {
    const key = `${String(o.apiVersion).split('/').length > 1 ? o.apiVersion.split('/')[0] : ''}/${o.id}`;
    if (ids.has(key)) fail(o, `${o.id} is defined twice`);
    ids.add(key);
  }

  for (const o of objects) {
    checkName(o);
    checkLabels(o, o.doc.metadata && o.doc.metadata.labels, 'metadata.labels');
  }

  for (const { obj, tpl } of workloads) {
    checkLabels(obj, tpl.labels, `${tpl.at.replace(/\.spec$/, '')}.metadata.labels`);
    const spec = obj.doc.spec || {};
    const sel = spec.selector;
    if (sel && !(obj.kind === 'Job' && !spec.manualSelector)) {
      checkLabels(obj, sel.matchLabels, 'spec.selector.matchLabels');
      if (selectorIsEmpty(sel)) fail(obj, 'spec.selector is empty (it would select every pod)');
      else if (!selectorMatches(sel, tpl.labels)) {
        fail(obj, `spec.selector ${JSON.stringify(sel)} does not match the pod template labels ${JSON.stringify(tpl.labels)}`);
      }
    }
    const claimTemplates = obj.kind === 'StatefulSet'
      ? (spec.volumeClaimTemplates || []).map((c) => c.metadata && c.metadata.name) : [];
    checkPodSpec(obj, tpl, { configMaps, claimTemplates });

    if (obj.kind === 'StatefulSet') {
      const svc = services.get(spec.serviceName);
      if (spec.serviceName === undefined) fail(obj, 'spec.serviceName is not set (a headless Service gives the pods their DNS names)');
      else if (!svc) fail(obj, `spec.serviceName '${spec.serviceName}' names no Service in the base`);
      else if (svc.doc.spec.clusterIP !== 'None') {
        fail(obj, `spec.serviceName '${spec.serviceName}' names a Service that is not headless (clusterIP: None)`);
      } else if (!selectorMatches({ matchLabels: svc.doc.spec.selector || {} }, tpl.labels) ||
                 selectorIsEmpty({ matchLabels: svc.doc.spec.selector })) {
        fail(obj, `spec.serviceName '${spec.serviceName}': that Service does not select this StatefulSet's pods`);
      }
    }
  }

  // Services: select some pods, and target ports those pods have.
  for (const svc of services.values()) {
    const s = svc.doc.spec || {};
    if (!s.selector || Object.keys(s.selector).length === 0) continue; // endpoints managed elsewhere
    checkLabels(svc, s.selector, 'spec.selector');
    const selected = workloads.filter((w) => selectorMatches({ matchLabels: s.selector }, w.tpl.labels));
    if (selected.length === 0) {
      fail(svc, `spec.selector ${JSON.stringify(s.selector)} selects no pod template in the base`);
      continue;
    }
    for (const p of s.ports || []) {
      const target = p.targetPort !== undefined ? p.targetPort : p.port;
      const ok = selected.every((w) => (w.tpl.spec.containers || []).some((c) => portIn(c, target)));
      if (!ok) {
        fail(svc, `port '${p.name || p.port}': targetPort ${JSON.stringify(target)} is not a container port ` +
                  `of every selected workload (${selected.map((w) => w.obj.id).join(', ')})`);
      }
    }
  }

  for (const pdb of byKind('PodDisruptionBudget')) {
    const sel = pdb.doc.spec && pdb.doc.spec.selector;
    if (selectorIsEmpty(sel)) fail(pdb, 'spec.selector is empty');
    else if (!workloads.some((w) => selectorMatches(sel, w.tpl.labels))) {
      fail(pdb, `spec.selector ${JSON.stringify(sel)} selects no pod template in the base`);
    }
  }
}

// ---------------------------------------------------------------------------
// 4. The parameter server's invariants: the flags must agree with the
// objects around them.

function flagsOf(container) {
  const text = [...(container.command || []), ...(container.args || [])].join(' ');
  const flags = {};
  for (const m of text.matchAll(/--([a-z_]+)=("[^"]*"|'[^']*'|[^\s"']+)/g)) flags[m[1]] = m[2].replace(/^["']|["']$/g, '');
  return flags;
}

function checkParamServer() {
  const services = new Map(objects.filter((o) => o.kind === 'Service').map((o) => [o.name, o]));
  for (const obj of objects) {
    const tpl = podTemplate(obj);
    if (!tpl) continue;
    for (const c of tpl.spec.containers || []) {
      const text = [...(c.command || []), ...(c.args || [])].join(' ');
      const isServer = /\bps_server\b/.test(text);
      const isWorker = /\bps_worker\b/.test(text);
      if (!isServer && !isWorker) continue;
      const f = flagsOf(c);
      const cw = `container '${c.name}'`;
      const need = (name) => {
        if (f[name] === undefined) fail(obj, `${cw}: --${name} is not set`);
        return f[name];
      };
      const etcd = need('etcd');
      if (etcd !== undefined) {
        const [host, port] = etcd.split(':');
        const svc = services.get(host);
        if (!svc) fail(obj, `${cw}: --etcd=${etcd}: no Service '${host}' in the base`);
        else if (!(svc.doc.spec.ports || []).some((p) => String(p.port) === port)) {
          fail(obj, `${cw}: --etcd=${etcd}: Service '${host}' has no port ${port}`);
        }
      }
      need('cluster');
      const mp = need('metrics_port');
      if (mp !== undefined && !portIn(c, Number(mp))) fail(obj, `${cw}: --metrics_port=${mp} is not a containerPort`);
      if (isServer) {
        const n = Number(need('num_servers'));
        const r = Number(need('replicas'));
        if (obj.kind !== 'StatefulSet') fail(obj, `${cw}: ps_server runs outside a StatefulSet (it needs stable names)`);
        else if (obj.doc.spec.replicas !== n) {
          fail(obj, `${cw}: --num_servers=${n} but spec.replicas is ${obj.doc.spec.replicas}`);
        }
        if (!(r >= 1 && r <= n)) fail(obj, `${cw}: --replicas=${r} must be in [1, --num_servers=${n}]`);
        const listen = need('listen');
        if (listen !== undefined && !portIn(c, Number(listen.split(':').pop()))) {
          fail(obj, `${cw}: --listen=${listen}: its port is not a containerPort`);
        }
        const adv = need('advertise');
        if (adv !== undefined && obj.kind === 'StatefulSet' && obj.doc.spec.serviceName !== undefined) {
          if (!adv.includes(`.${obj.doc.spec.serviceName}.`)) {
            fail(obj, `${cw}: --advertise=${adv} is not under the governing Service '${obj.doc.spec.serviceName}'`);
          }
          if (listen !== undefined && adv.split(':').pop() !== listen.split(':').pop()) {
            fail(obj, `${cw}: --advertise=${adv} and --listen=${listen} name different ports`);
          }
        }
        if (need('server_id') !== undefined && obj.doc.spec.podManagementPolicy !== 'Parallel') {
          fail(obj, 'spec.podManagementPolicy should be Parallel: a server is not ready until its peers run');
        }
      }
      if (isWorker) {
        const n = Number(need('num_workers'));
        const idx = need('worker_index');
        if (obj.kind !== 'Job') {
          fail(obj, `${cw}: ps_worker runs outside a Job`);
        } else {
          const s = obj.doc.spec;
          if (s.completions !== n) fail(obj, `${cw}: --num_workers=${n} but spec.completions is ${s.completions}`);
          if (s.parallelism !== n) {
            fail(obj, `${cw}: --num_workers=${n} but spec.parallelism is ${s.parallelism} (all workers must run at once)`);
          }
          if (idx !== '$(JOB_COMPLETION_INDEX)' || s.completionMode !== 'Indexed') {
            fail(obj, `${cw}: --worker_index must be $(JOB_COMPLETION_INDEX) in an Indexed Job`);
          }
        }
        if (f.metrics_host === undefined || f.metrics_host.startsWith('127.')) {
          fail(obj, `${cw}: --metrics_host is loopback: /metrics would be unreachable from Prometheus`);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------

const files = readKustomization();
loadObjects(files);
for (const o of objects) validateAgainstSchema(o);
checkCrossReferences();
checkParamServer();

const width = Math.max(0, ...objects.map((o) => o.file.length));
let bad = 0;
let problems = 0;
for (const o of objects) {
  const status = o.problems.length ? 'FAIL' : 'ok  ';
  console.log(`${status}  ${o.file.padEnd(width)}  ${o.id} (${o.apiVersion})`);
  if (o.problems.length) bad++;
  for (const p of o.problems) {
    console.log(`        - ${o.file}: ${o.id}: ${p}`);
    problems++;
  }
}
for (const p of fileProblems) {
  console.log(`FAIL  ${p.where}: ${p.msg}`);
  problems++;
}
if (problems) {
  console.log(`k8s manifests: INVALID: ${problems} problem(s); ${bad} of ${objects.length} object(s) invalid` +
              (fileProblems.length ? `, ${fileProblems.length} file-level` : ''));
  process.exit(1);
}
if (objects.length === 0) {
  console.log('k8s manifests: INVALID: no objects found');
  process.exit(1);
}
console.log(`k8s manifests: ${objects.length} objects valid (Kubernetes API schema of kubernetes-models ${kmVersion})`);
