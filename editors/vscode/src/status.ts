// Status-bar item: pool size and indexing progress, from `soma/poolStatus` / `soma.poolStatus`.
import * as vscode from 'vscode';

export interface PoolStatus {
  version?: number;
  pools?: string[];
  records?: number;
  files?: number;
  errors?: number;
  indexing?: boolean | number | { done?: number; total?: number } | null;
  percentage?: number | null; // how far the load under way is (0–100), null when not indexing
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export class StatusItem implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;

  constructor() {
    this.item = vscode.window.createStatusBarItem('soma.status', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'Soma';
    this.item.command = 'soma.showOutput';
    this.starting();
    this.item.show();
  }

  starting(): void {
    this.item.text = '$(sync~spin) Soma';
    this.item.tooltip = 'Soma: starting the language server…';
    this.item.backgroundColor = undefined;
    this.item.command = 'soma.showOutput';
  }

  stopped(reason: string): void {
    this.item.text = '$(error) Soma';
    this.item.tooltip = `Soma: ${reason} — click to restart`;
    this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
    this.item.command = 'soma.restartServer';
  }

  update(s: PoolStatus): void {
    const records = typeof s.records === 'number' ? s.records : 0;
    const errors = typeof s.errors === 'number' ? s.errors : 0;
    let indexing = '';
    const ix = s.indexing;
    if (typeof ix === 'number') indexing = ` · indexing ${ix}`;
    else if (ix && typeof ix === 'object' && typeof ix.done === 'number')
      indexing = ` · indexing ${ix.done}${typeof ix.total === 'number' ? `/${ix.total}` : ''}`;
    else if (ix && typeof s.percentage === 'number') indexing = ` · indexing ${s.percentage}%`;
    else if (ix) indexing = ' · indexing…';
    this.item.text =
      `${indexing ? '$(sync~spin)' : errors ? '$(warning)' : '$(beaker)'} Soma: ${plural(records, 'experiment')}` +
      (errors ? ` · ${plural(errors, 'error')}` : '') +
      indexing;
    const md = new vscode.MarkdownString(undefined, true);
    md.isTrusted = false;
    md.appendText(`Soma experiment pool: ${plural(records, 'record')} in ${plural(s.files ?? 0, 'file')}`);
    if (errors) md.appendText(`, ${plural(errors, 'bad record')} (see the output and the pool files' problems)`);
    md.appendMarkdown('\n\n');
    for (const p of s.pools ?? []) {
      md.appendText(`• ${p}`);
      md.appendMarkdown('\n\n');
    }
    if (!(s.pools ?? []).length) md.appendText('No pool directory found.\n\n');
    md.appendText(`version ${s.version ?? '?'} — click to show the output`);
    this.item.tooltip = md;
    this.item.backgroundColor = errors ? new vscode.ThemeColor('statusBarItem.warningBackground') : undefined;
    this.item.command = 'soma.showOutput';
  }

  dispose(): void {
    this.item.dispose();
  }
}
