// What a tree view shows, as plain data: the vscode layer maps each node to a TreeItem, tests
// and the captured view in docs/clients.md render it as text.

export interface ViewNode {
  /** Stable within one tree (VS Code keeps expansion by id). */
  id: string;
  label: string;
  description?: string;
  tooltip?: string;
  /** A file to open when the node is chosen. */
  path?: string;
  /** A codicon name. */
  icon?: string;
  /** Menu key in package.json (`view/item/context` when clauses). */
  contextValue?: string;
  /** What a node's menu commands need besides `path` (e.g. the version to restore). */
  data?: Record<string, string>;
  children?: ViewNode[];
}

/** The tree as indented text lines: `label  — description`. */
export function renderTree(nodes: readonly ViewNode[], depth = 0): string[] {
  const lines: string[] = [];
  for (const node of nodes) {
    const marker = node.children && node.children.length ? "▾ " : "  ";
    const description = node.description ? `  — ${node.description}` : "";
    lines.push(`${"  ".repeat(depth)}${marker}${node.label}${description}`);
    if (node.children) {
      lines.push(...renderTree(node.children, depth + 1));
    }
  }
  return lines;
}

export function findNode(nodes: readonly ViewNode[], predicate: (n: ViewNode) => boolean): ViewNode | undefined {
  for (const node of nodes) {
    if (predicate(node)) {
      return node;
    }
    const found = node.children ? findNode(node.children, predicate) : undefined;
    if (found) {
      return found;
    }
  }
  return undefined;
}
