// Which command starts soma-lsp: the `soma.server.command` setting, else `soma-lsp` on PATH, else the
// interpreter selected in the Python extension with `-m soma_lsp`, else `python3 -m soma_lsp`.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';

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

export async function resolveServerCommand(): Promise<ServerCommand> {
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
  const python = await pythonFromExtension(folder?.uri);
  if (python) return { command: python, args: ['-m', 'soma_lsp'], origin: 'Python extension interpreter' };
  return {
    command: process.platform === 'win32' ? 'python' : 'python3',
    args: ['-m', 'soma_lsp'],
    origin: 'fallback (no setting, no soma-lsp on PATH, no Python extension)',
  };
}
