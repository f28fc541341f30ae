// The extension's private environment for soma-lsp: a Python virtual environment in the extension's
// global storage, made and filled with pip when the user accepts the offer to install the server
// (extension.ts offers it when no server is found). Nothing here runs without that consent.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const MIN_PYTHON: [number, number] = [3, 11];

/** The virtual environment's folder inside the extension's global storage. */
export function privateEnv(storage: string): string {
  return path.join(storage, 'soma-lsp-venv');
}

/** Its `soma-lsp` script, when an install finished. */
export function privateServer(storage: string): string | undefined {
  const bin = process.platform === 'win32' ? path.join('Scripts', 'soma-lsp.exe') : path.join('bin', 'soma-lsp');
  const exe = path.join(privateEnv(storage), bin);
  try {
    fs.accessSync(exe, fs.constants.X_OK);
    return exe;
  } catch {
    return undefined;
  }
}

export interface Run {
  code: number | null;
  output: string;
}

/** Run `command args`, every output line also to `log`; resolves with the exit code and the output. */
export function run(command: string, args: string[], log?: (line: string) => void, timeoutMs = 600000): Promise<Run> {
  return new Promise((resolve) => {
    let output = '';
    let child;
    try {
      child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONUNBUFFERED: '1' } });
    } catch (e) {
      resolve({ code: null, output: e instanceof Error ? e.message : String(e) });
      return;
    }
    const timer = setTimeout(() => child.kill(), timeoutMs);
    const take = (chunk: Buffer) => {
      const text = chunk.toString();
      output += text;
      for (const line of text.split(/\r?\n/)) if (line.trim() && log) log(line);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (e: Error) => {
      clearTimeout(timer);
      resolve({ code: null, output: output + e.message });
    });
    child.on('close', (code: number | null) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Whether `python` is Python ≥ 3.11 (false when it does not run). */
export async function isRecentPython(python: string): Promise<boolean> {
  const check = `import sys; sys.exit(0 if sys.version_info[:2] >= (${MIN_PYTHON.join(', ')}) else 1)`;
  return (await run(python, ['-c', check], undefined, 30000)).code === 0;
}

/** Whether `python` can import soma_lsp (then `python -m soma_lsp` is a server). */
export async function canImportServer(python: string): Promise<boolean> {
  return (await run(python, ['-c', 'import soma_lsp'], undefined, 30000)).code === 0;
}

/** The last lines of an output, for an error message. */
function tail(output: string, lines = 6): string {
  return output.trim().split(/\r?\n/).slice(-lines).join('\n');
}

/** Make the private environment with `python` and pip-install `source` (a package name, a wheel or a
 * checkout) into it; resolves with its `soma-lsp`, or rejects with what failed and its last output. */
export async function installPrivate(python: string, storage: string, source: string,
  log: (line: string) => void): Promise<string> {
  const venv = privateEnv(storage);
  fs.mkdirSync(storage, { recursive: true });
  log(`creating ${venv} with ${python}`);
  const made = await run(python, ['-m', 'venv', '--clear', venv], log);
  if (made.code !== 0) throw new Error(`${python} -m venv failed (exit ${made.code}):\n${tail(made.output)}`);
  const venvPython = path.join(venv, process.platform === 'win32' ? path.join('Scripts', 'python.exe') : path.join('bin', 'python'));
  log(`installing ${source} into ${venv}`);
  const installed = await run(venvPython, ['-m', 'pip', 'install', '--upgrade', source], log);
  if (installed.code !== 0) throw new Error(`pip install ${source} failed (exit ${installed.code}):\n${tail(installed.output)}`);
  const server = privateServer(storage);
  if (!server) throw new Error(`pip installed ${source}, but ${venv} has no soma-lsp script`);
  return server;
}
