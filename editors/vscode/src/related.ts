// "Find Related Experiments": a quick pick over the server's `soma.findRelatedExperiments` results.
// The server ranks, gates and orders; this file only lays the JSON fields (docs/spec.md §2.8) out.
import * as vscode from 'vscode';

export interface Result {
  id: string;
  name: string;
  status?: string | null;
  dead_end?: boolean;
  tied?: boolean;
  score?: number | null;
  components?: Record<string, number | null | undefined>;
  weights?: Record<string, number | null | undefined>;
  matched_terms?: string[];
  shared_components?: string[];
  headline?: string | null;
  time?: string | null;
  location?: { uri: string; line?: number | null } | null;
  url?: string | null;
}

/** The argument object of `soma.findRelatedExperiments` (and of the `soma.showRelated` lens). */
export interface FindArgs {
  uri?: string;
  position?: { line: number; character: number };
  range?: { start: { line: number; character: number }; end: { line: number; character: number } };
  text?: string;
  limit?: number;
}

type Execute = (args: FindArgs) => Promise<unknown>;

const STATUS_ICONS: Record<string, string> = {
  succeeded: 'pass',
  failed: 'error',
  crashed: 'flame',
  regressed: 'arrow-down',
  running: 'sync',
  planned: 'calendar',
  cancelled: 'circle-slash',
  unknown: 'question',
};

export function statusIcon(r: Result): string {
  if (r.dead_end) return '$(error)';
  return `$(${STATUS_ICONS[(r.status || 'unknown').toLowerCase()] ?? 'circle-outline'})`;
}

/** Record text is data: `$(name)` in it must not render as an icon (VS Code's own escapeIcons). */
export function escapeIcons(text: string): string {
  return text.replace(/(\\)?\$\([A-Za-z0-9-]+(?:~[A-Za-z]+)?\)/g, (m, escaped) => (escaped ? m : `\\${m}`));
}

function num(v: number | null | undefined): string {
  return typeof v === 'number' && Number.isFinite(v) ? v.toFixed(3) : String(v);
}

/** `lexical 0.910×0.533 · recency 0.420×0.200 · …` — value × effective weight, in the server's order. */
export function breakdown(r: Result): string {
  const parts: string[] = [];
  for (const [name, value] of Object.entries(r.components ?? {})) {
    if (value === null || value === undefined) continue; // the term did not apply
    const w = r.weights?.[name];
    parts.push(w === null || w === undefined ? `${name} ${num(value)}` : `${name} ${num(value)}×${num(w)}`);
  }
  return parts.join(' · ');
}

export class RelatedItem implements vscode.QuickPickItem {
  label: string;
  description: string;
  detail: string;
  buttons: vscode.QuickInputButton[];
  constructor(readonly result: Result) {
    const r = result;
    const t = (v: unknown) => escapeIcons(String(v));
    this.label = `${statusIcon(r)} ${t(r.name)}`;
    const desc = [t(r.id), `score ${num(r.score)}`];
    if (r.status) desc.push(t(r.status));
    if (r.dead_end) desc.push('dead end');
    if (r.tied) desc.push('$(pinned) tied to this code');
    this.description = desc.join(' · ');
    const detail: string[] = [];
    const b = breakdown(r);
    if (b) detail.push(t(b));
    if (r.matched_terms?.length) detail.push(`matched: ${t(r.matched_terms.join(', '))}`);
    if (r.shared_components?.length) detail.push(`shared: ${t(r.shared_components.join(', '))}`);
    if (r.time) detail.push(t(r.time));
    // The headline first: it is what the row is about; the breakdown explains the score after it.
    this.detail = (r.headline ? `${t(r.headline)} — ` : '') + detail.join(' · ');
    this.buttons = r.url
      ? [{
        iconPath: new vscode.ThemeIcon('link-external'),
        tooltip: isWebLink(r.url) ? `Open ${r.url}` : `Not a web link, will not be opened: ${r.url}`,
      }]
      : [];
  }
}

async function openLocation(r: Result): Promise<void> {
  if (!r.location?.uri) {
    void vscode.window.showInformationMessage(`Soma: ${r.id} has no location.`);
    return;
  }
  const line = Math.max(0, r.location.line ?? 0);
  const pos = new vscode.Position(line, 0);
  await vscode.window.showTextDocument(vscode.Uri.parse(r.location.uri), {
    selection: new vscode.Range(pos, pos),
    preview: true,
  });
}

function isWebLink(url: string): boolean {
  return /^https?:\/\/[^\s]+$/i.test(url.trim());
}

async function openUrl(r: Result): Promise<void> {
  if (!r.url) return;
  let uri: vscode.Uri | undefined;
  try {
    uri = isWebLink(r.url) ? vscode.Uri.parse(r.url.trim(), true) : undefined;
  } catch {
    uri = undefined;
  }
  // Record text is data: only web links are opened, and only because the user clicked the button.
  if (!uri || (uri.scheme !== 'http' && uri.scheme !== 'https')) {
    void vscode.window.showWarningMessage(`Soma: not opening ${JSON.stringify(r.url)} (only http/https links are opened).`);
    return;
  }
  await vscode.env.openExternal(uri);
}

/** Show the pick for `args`; the list is filled in when the server answers. */
export async function showRelated(
  execute: Execute,
  args: FindArgs,
  title: string,
  onHide?: () => void,
): Promise<void> {
  const qp = vscode.window.createQuickPick<RelatedItem>();
  qp.title = title;
  qp.placeholder = 'Finding related experiments…';
  qp.matchOnDescription = true;
  qp.matchOnDetail = true;
  qp.busy = true;
  const disposables: vscode.Disposable[] = [qp];
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    onHide?.();
    disposables.forEach((d) => d.dispose());
  };
  disposables.push(
    qp.onDidHide(finish),
    qp.onDidAccept(() => {
      const item = qp.selectedItems[0] ?? qp.activeItems[0];
      qp.hide();
      if (item) void openLocation(item.result).catch((e) => showError('cannot open the record', e));
    }),
    qp.onDidTriggerItemButton((e) => void openUrl(e.item.result).catch((err) => showError('cannot open the link', err))),
  );
  qp.show();
  try {
    const answer = await execute(args);
    if (done) return;
    const results = Array.isArray(answer) ? (answer as Result[]) : [];
    qp.items = results.map((r) => new RelatedItem(r));
    const dead = results.filter((r) => r.dead_end).length;
    qp.placeholder =
      results.length === 0
        ? 'No related experiments'
        : `${results.length} related experiment${results.length === 1 ? '' : 's'}` +
          (dead ? ` · ${dead} dead end${dead === 1 ? '' : 's'}` : '') +
          ' — ⚓ tied to this code first, then by score; pick one to open its record';
  } catch (e) {
    if (done) return;
    qp.placeholder = 'The server failed to answer — see "Soma: Show Output"';
    showError('find related experiments failed', e);
  } finally {
    if (!done) qp.busy = false;
  }
}

function showError(what: string, e: unknown): void {
  const msg = e instanceof Error ? e.message : String(e);
  void vscode.window.showErrorMessage(`Soma: ${what}: ${msg}`);
}
