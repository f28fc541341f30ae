// VS Code client for soma-lsp. The server does all the work (ranking, gating, hover text, lenses,
// diagnostics); this client starts it, forwards settings and lays out `soma.findRelatedExperiments`.
import * as net from 'net';
import * as os from 'os';
import * as vscode from 'vscode';
import {
  CloseAction,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  StreamInfo,
  TransportKind,
} from 'vscode-languageclient/node';
import { installPrivate } from './install';
import { FindArgs, showRelated } from './related';
import { MissingServer, resolveServerCommand } from './serverCommand';
import { PoolStatus, StatusItem } from './status';

const CLIENT_ID = 'soma'; // also makes vscode-languageclient read `soma.trace.server`
const CLIENT_NAME = 'Soma';

let output: vscode.OutputChannel;
let status: StatusItem;
let client: LanguageClient | undefined;
let starting: Promise<LanguageClient | undefined> | undefined;
let queue: Promise<unknown> = Promise.resolve();
let storage: string; // the extension's global storage folder: its private environment lives there
let missingReported = false;

function log(msg: string): void {
  output.appendLine(`[client ${new Date().toISOString()}] ${msg}`);
}

/** The `soma` settings as a plain object (nested like the server expects), without client-only keys
 * and without unset (`null`) values, so the server's defaults apply. */
function serverSettings(): Record<string, unknown> {
  const all = JSON.parse(JSON.stringify(vscode.workspace.getConfiguration('soma'))) as Record<string, unknown>;
  delete all.server;
  delete all.trace;
  const strip = (o: Record<string, unknown>) => {
    for (const [k, v] of Object.entries(o)) {
      if (v === null || v === undefined) delete o[k];
      else if (typeof v === 'object' && !Array.isArray(v)) strip(v as Record<string, unknown>);
    }
  };
  strip(all);
  return all;
}

// `soma.server.pipe`: connect to a server the user started with `soma-lsp serve --pipe PATH` (a Unix
// socket only its owner can connect to; `serve --tcp` is unauthenticated); else start the command.
// `what` names the server in error messages, `setting` is the one to fix.
async function serverConnection(): Promise<{ options: ServerOptions; what: string; setting: string } | undefined> {
  const pipe = vscode.workspace.getConfiguration('soma').get<string | null>('server.pipe');
  if (pipe) {
    const path = pipe.replace(/^~(?=$|\/)/, os.homedir());
    log(`connecting to the server on ${path} (soma.server.pipe)`);
    const options = () => new Promise<StreamInfo>((resolve, reject) => {
      const socket = net.connect(path);
      socket.once('connect', () => resolve({ reader: socket, writer: socket }));
      socket.once('error', reject);
    });
    return { options, what: `on ${path}`, setting: 'soma.server.pipe' };
  }
  const cmd = await resolveServerCommand(storage);
  if ('missing' in cmd) {
    reportMissing(cmd);
    return undefined;
  }
  const folder = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file');
  log(`starting the server (${cmd.origin}): ${JSON.stringify([cmd.command, ...cmd.args])}`);
  const options: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    transport: TransportKind.stdio,
    options: {
      cwd: folder?.uri.fsPath,
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
    },
  };
  return { options, what: JSON.stringify([cmd.command, ...cmd.args]), setting: 'soma.server.command' };
}

async function startClient(): Promise<LanguageClient | undefined> {
  status.starting();
  const server = await serverConnection();
  if (server === undefined) return undefined;
  const serverOptions = server.options;
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file' }],
    synchronize: { configurationSection: 'soma' },
    initializationOptions: () => serverSettings(),
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never, // the status bar and error messages say when to look
    // A server that never came up is reported once (below), not restarted in a loop; one that crashes
    // later is restarted, at most 4 times in 3 minutes.
    initializationFailedHandler: () => false,
    errorHandler: {
      error: (_error, _message, count) => ({ action: count && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
      closed: () => {
        if (!everRunning) return { action: CloseAction.DoNotRestart, handled: true };
        const now = Date.now();
        crashes = crashes.filter((t) => now - t < 3 * 60 * 1000);
        crashes.push(now);
        if (crashes.length > 4) {
          return {
            action: CloseAction.DoNotRestart,
            message: 'The Soma server stopped 5 times in the last 3 minutes and will not be restarted. ' +
              'See "Soma: Show Output"; "Soma: Restart Server" starts it again.',
          };
        }
        log('the server connection closed; restarting it');
        return { action: CloseAction.Restart, handled: true };
      },
    },
  };
  let everRunning = false;
  let crashes: number[] = [];
  const c = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  c.onDidChangeState((e) => {
    if (client !== c) return;
    if (e.newState === State.Stopped) status.stopped('the language server stopped');
    else if (e.newState === State.Starting) status.starting();
    else if (e.newState === State.Running) queryStatus(c);
  });
  let failure: string | undefined;
  try {
    await c.start();
  } catch (e) {
    failure = e instanceof Error ? e.message : String(e);
  }
  if (failure === undefined && c.state !== State.Running) failure = 'the server exited during start-up';
  if (failure !== undefined) {
    const msg = failure;
    log(`the server did not start: ${msg}`);
    status.stopped(`the server did not start: ${msg}`);
    void c.dispose().catch(() => undefined);
    void vscode.window
      .showErrorMessage(
        `Soma: could not start the language server ${server.what}: ${msg}. ` +
          `Check the command in a terminal, or set "${server.setting}".`,
        'Show Output',
        'Open Settings',
      )
      .then((choice) => {
        if (choice === 'Show Output') output.show(true);
        else if (choice === 'Open Settings')
          void vscode.commands.executeCommand('workbench.action.openSettings', server.setting);
      });
    return undefined;
  }
  everRunning = true;
  client = c;
  c.onNotification('soma/poolStatus', (s: PoolStatus) => status.update(s));
  queryStatus(c);
  log('the server is running');
  return c;
}

/** No server found: say so (once a session; the status bar and the log say it every time) with the
 * exact fix, and offer to install it into the private environment with the Python that was found. */
function reportMissing(found: MissingServer): void {
  const source = vscode.workspace.getConfiguration('soma').get<string>('server.installSource') || 'soma-lsp';
  const python = found.python;
  const why = 'not on PATH' + (found.tried.length ? `, and ${found.tried.join(', ')} cannot import soma_lsp` : ', and no Python found');
  log(`soma-lsp is not installed: ${why}`);
  status.stopped('soma-lsp is not installed');
  if (missingReported) return;
  missingReported = true;
  const install = 'Install in a Private Environment';
  const fix = python
    ? `Fix: run \`${python} -m pip install ${source}\` (or \`pipx install ${source}\`), then "Soma: Restart Server"; ` +
      `or set "soma.server.command". Or let Soma install it with ${python} into a private environment.`
    : `Fix: install Python 3.11 or newer, then \`pipx install ${source}\` and "Soma: Restart Server"; or set "soma.server.command".`;
  void vscode.window
    .showErrorMessage(`Soma: the language server soma-lsp is not installed (${why}). ${fix}`,
      ...(python ? [install] : []), 'Open Settings')
    .then((choice) => {
      if (choice === install && python) void installServer(python, source);
      else if (choice === 'Open Settings')
        void vscode.commands.executeCommand('workbench.action.openSettings', 'soma.server');
    });
}

async function installServer(python: string, source: string): Promise<void> {
  try {
    const server = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Soma: installing ${source} into a private environment` },
      () => installPrivate(python, storage, source, (line) => log(`install: ${line}`)),
    );
    log(`installed: ${server}`);
    await restart();
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    log(`installing soma-lsp failed: ${msg}`);
    const choice = await vscode.window.showErrorMessage(`Soma: installing soma-lsp failed: ${msg}`, 'Show Output');
    if (choice === 'Show Output') output.show(true);
  }
}

function queryStatus(c: LanguageClient): void {
  c.sendRequest(ExecuteCommandRequest.type, { command: 'soma.poolStatus', arguments: [{}] }).then(
    (s) => {
      if (s && typeof s === 'object' && client === c) status.update(s as PoolStatus);
    },
    (e) => log(`soma.poolStatus failed: ${e instanceof Error ? e.message : String(e)}`),
  );
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  starting = undefined;
  if (!c) return;
  try {
    if (c.state !== State.Stopped) await c.stop(5000);
  } catch (e) {
    log(`stopping the server: ${e instanceof Error ? e.message : String(e)}`);
  }
  try {
    await c.dispose(2000);
  } catch {
    // already gone
  }
}

/** Run start/stop/restart one after another, never interleaved. */
function serialized<T>(f: () => Promise<T>): Promise<T> {
  const p = queue.then(f, f);
  queue = p.catch(() => undefined);
  return p;
}

/** Resolves when `c` is running, or after `ms` / once it stops. */
function whenRunning(c: LanguageClient, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    const sub = c.onDidChangeState((e) => {
      if (e.newState !== State.Starting) done();
    });
    function done() {
      clearTimeout(timer);
      sub.dispose();
      resolve();
    }
  });
}

/** The running client; starts one when there is none (or the last one gave up). */
async function ensureClient(): Promise<LanguageClient | undefined> {
  const c = client;
  if (c && c.state === State.Starting) await whenRunning(c, 30000); // it is restarting itself after a crash
  if (c && c === client && c.state === State.Running) return c;
  if (!starting) {
    starting = serialized(async () => {
      if (client && client.state === State.Running) return client;
      await stopClient(); // a client that stopped for good
      return startClient();
    });
    starting.finally(() => (starting = undefined)).catch(() => undefined);
  }
  return starting;
}

function restart(): Promise<LanguageClient | undefined> {
  status.starting();
  return serialized(async () => {
    log('restarting the server');
    await stopClient();
    return startClient();
  });
}

async function executeServerCommand(command: string, arg: unknown, token?: vscode.CancellationToken): Promise<unknown> {
  const c = await ensureClient();
  if (!c) throw new Error('the language server is not running');
  return c.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] }, token);
}

function findArgsForEditor(editor: vscode.TextEditor): FindArgs {
  const uri = editor.document.uri.toString();
  const sel = editor.selection;
  if (!sel.isEmpty) {
    return {
      uri,
      range: {
        start: { line: sel.start.line, character: sel.start.character },
        end: { line: sel.end.line, character: sel.end.character },
      },
    };
  }
  return { uri, position: { line: sel.active.line, character: sel.active.character } };
}

function pick(args: FindArgs, title: string): Promise<void> {
  const cts = new vscode.CancellationTokenSource();
  return showRelated(
    (a) => executeServerCommand('soma.findRelatedExperiments', a, cts.token),
    args,
    title,
    () => cts.cancel(),
  ).finally(() => cts.dispose());
}

function describe(uri: string | undefined, line?: number): string {
  if (!uri) return 'Related experiments';
  const name = vscode.Uri.parse(uri).path.split('/').pop();
  return `Related experiments — ${name}${line === undefined ? '' : `:${line + 1}`}`;
}

async function findRelatedCommand(resource?: vscode.Uri): Promise<void> {
  let editor = vscode.window.activeTextEditor;
  if (resource instanceof vscode.Uri && editor?.document.uri.toString() !== resource.toString()) {
    editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === resource.toString());
  }
  if (editor && editor.document.uri.scheme === 'file') {
    const args = findArgsForEditor(editor);
    const line = args.range ? args.range.start.line : args.position?.line;
    return pick(args, describe(args.uri, line));
  }
  const text = await vscode.window.showInputBox({
    title: 'Soma: Find Related Experiments',
    prompt: 'No file editor is active: describe what you are about to try',
    placeHolder: 'e.g. rope theta 500k',
  });
  if (text && text.trim()) await pick({ text }, `Related experiments — “${text.trim()}”`);
}

async function showRelatedCommand(arg?: FindArgs): Promise<void> {
  if (!arg || typeof arg !== 'object') return findRelatedCommand();
  return pick(arg, describe(arg.uri, arg.position?.line ?? arg.range?.start.line));
}

async function reloadCommand(): Promise<void> {
  try {
    const answer = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: 'Soma: reloading the experiment pool' },
      () => executeServerCommand('soma.reloadPool', {}),
    );
    if (answer && typeof answer === 'object' && 'records' in (answer as object)) status.update(answer as PoolStatus);
    vscode.window.setStatusBarMessage('Soma: experiment pool reloaded', 3000);
  } catch (e) {
    void vscode.window.showErrorMessage(`Soma: reload failed: ${e instanceof Error ? e.message : String(e)}`);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel(CLIENT_NAME);
  storage = context.globalStorageUri.fsPath;
  status = new StatusItem();
  context.subscriptions.push(
    output,
    status,
    vscode.commands.registerCommand('soma.findRelated', findRelatedCommand),
    vscode.commands.registerCommand('soma.showRelated', showRelatedCommand),
    vscode.commands.registerCommand('soma.reload', reloadCommand),
    vscode.commands.registerCommand('soma.restartServer', () => restart()),
    vscode.commands.registerCommand('soma.showOutput', () => output.show(true)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('soma.server.command') || e.affectsConfiguration('soma.server.pipe')) {
        log('soma.server.command or soma.server.pipe changed');
        void restart();
      }
    }),
  );
  void ensureClient();
}

export async function deactivate(): Promise<void> {
  await serialized(stopClient);
}
