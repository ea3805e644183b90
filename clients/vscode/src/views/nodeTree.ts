// A TreeDataProvider over the core's ViewNode trees: the core builds the nodes, this maps them.
import * as vscode from "vscode";

import { errorText } from "../core/format";
import type { ViewNode } from "../core/viewNode";

export class NodeTreeProvider implements vscode.TreeDataProvider<ViewNode> {
  private readonly changed = new vscode.EventEmitter<ViewNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(private readonly load: () => Promise<ViewNode[]>) {}

  refresh(): void {
    this.changed.fire(undefined);
  }

  getTreeItem(node: ViewNode): vscode.TreeItem {
    const state = node.children && node.children.length ? vscode.TreeItemCollapsibleState.Expanded : vscode.TreeItemCollapsibleState.None;
    const item = new vscode.TreeItem(node.label, state);
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.contextValue = node.contextValue;
    if (node.icon) {
      item.iconPath = new vscode.ThemeIcon(node.icon);
    }
    if (node.path && !node.children?.length) {
      item.resourceUri = vscode.Uri.file(node.path);
      item.command = { command: "memoryd.openPath", title: "Open", arguments: [node] };
    }
    return item;
  }

  async getChildren(node?: ViewNode): Promise<ViewNode[]> {
    if (node) {
      return node.children ?? [];
    }
    try {
      return await this.load();
    } catch (error) {
      return [{ id: "error", label: errorText(error), tooltip: errorText(error), icon: "warning" }];
    }
  }

  dispose(): void {
    this.changed.dispose();
  }
}
