// Which command starts soma-lsp: the `soma.server.command` setting, else `soma-lsp` on PATH, else the
// one in the extension's private environment (install.ts), else `-m soma_lsp` with the interpreter
// selected in the Python extension, `python3` or `python` — the first that can import it. None of
// these: the server is missing, and the first Python >= 3.11 found is named for the install offer.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { canImportServer, isRecentPython, privateServer } from './install';

export interface ServerCommand {
  command: string;
  args: string[];
  /** where the command came from, for the log */
  origin: string;
}

/** Split a command line on whitespace; single or double quotes group, backslash escapes. */
export function splitCommandLine(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) cur += line[++i];
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      cur += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += c;
      inWord = true;
    }
  }
  if (inWord) out.push(cur);
  return out;
}

function expand(part: string, folder: string | undefined): string {
  let s = part;
  if (s === '~' || s.startsWith('~/')) s = path.join(os.homedir(), s.slice(1));
  s = s.replace(/\$\{userHome\}/g, os.homedir());
  if (folder) s = s.replace(/\$\{workspaceFolder\}/g, folder);
  return s;
}

/** The first executable called `name` on PATH (process.env.PATH), or undefined. */
export function findOnPath(name: string): string | undefined {
  const exts = process.platform === 'win32' ? (process.env.PATHEXT || '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        if (fs.statSync(candidate).isFile()) return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}

function withTimeout<T>(p: PromiseLike<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    Promise.resolve(p).then(
      (v) => { clearTimeout(timer); resolve(v); },
      () => { clearTimeout(timer); resolve(undefined); },
    );
  });
}

/** The interpreter the Python extension has selected for `resource`, if that extension is installed. */
async function pythonFromExtension(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const api: any = ext.isActive ? ext.exports : await withTimeout(ext.activate(), 10000);
  if (!api) return undefined;
  try {
    const envs = api.environments;
    if (envs?.getActiveEnvironmentPath) {
      const active = envs.getActiveEnvironmentPath(resource);
      const resolved = envs.resolveEnvironment ? await withTimeout(envs.resolveEnvironment(active), 10000) : undefined;
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const exe = (resolved as any)?.executable?.uri?.fsPath ?? active?.path;
      if (exe) return exe;
    }
    const details = api.settings?.getExecutionDetails?.(resource);
    if (details?.execCommand?.length) return details.execCommand[0];
  } catch {
    // an old or broken Python extension: fall through
  }
  return undefined;
}

export interface MissingServer {
  missing: true;
  /** a Python >= 3.11 to install the server with, when one was found */
  python?: string;
  /** the Pythons that could not import soma_lsp */
  tried: string[];
}

export async function resolveServerCommand(storage: string): Promise<ServerCommand | MissingServer> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const folderPath = folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined;
  const setting = vscode.workspace.getConfiguration('soma').get<string | string[] | null>('server.command');
  let parts: string[] = [];
  if (Array.isArray(setting)) parts = setting.filter((p) => typeof p === 'string');
  else if (typeof setting === 'string') parts = splitCommandLine(setting);
  parts = parts.map((p) => expand(p, folderPath)).filter((p, i) => i > 0 || p.length > 0);
  if (parts.length > 0) {
    return { command: parts[0], args: parts.slice(1), origin: 'setting soma.server.command' };
  }
  const onPath = findOnPath('soma-lsp');
  if (onPath) return { command: onPath, args: [], origin: 'soma-lsp on PATH' };
  const mine = privateServer(storage);
  if (mine) return { command: mine, args: [], origin: "the extension's private environment" };
  const pythons = [await pythonFromExtension(folder?.uri), findOnPath('python3'), findOnPath('python')]
    .filter((p, i, all): p is string => !!p && all.indexOf(p) === i);
  for (const python of pythons) {
    if (await canImportServer(python)) return { command: python, args: ['-m', 'soma_lsp'], origin: `${python} -m soma_lsp` };
  }
  for (const python of pythons) {
    if (await isRecentPython(python)) return { missing: true, python, tried: pythons };
  }
  return { missing: true, tried: pythons };
}
