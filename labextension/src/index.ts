/**
 * The JupyterLab plugin: registers the cancho language with the editor language registry, so
 * notebooks whose kernel reports `codemirror_mode: "cancho"` (or mimetype `text/x-cancho`) and
 * `.cho` files in the editor are highlighted.
 *
 * The word catalogue is loaded, not bundled: `static/words.json` beside this bundle (served by
 * JupyterLab with the extension's other static files) is written by
 * `python -m cancho_kernel.highlight_words --write`, so a new builtin or keyword reaches the
 * editor without rebuilding the extension with node.
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';

import { cancho, Words } from './cancho';

/** The language registration, exported for tests and for other extensions. */
export const CANCHO_LANGUAGE = {
  name: 'cancho',
  displayName: 'cancho',
  mime: 'text/x-cancho',
  extensions: ['cho'],
  alias: ['cho']
} as const;

/** The package name JupyterLab serves this extension's static files under. */
const PACKAGE = 'cancho-jupyterlab';

/** The word catalogue shipped beside the bundle; without it, highlighting keeps its structure
 * (strings, comments, numbers, directives, rows, regions) and no word classes. */
export async function loadWords(): Promise<Words> {
  const url = URLExt.join(
    PageConfig.getOption('fullLabextensionsUrl'),
    PACKAGE,
    'static',
    'words.json'
  );
  try {
    const response = await fetch(url, { credentials: 'same-origin' });
    if (!response.ok) {
      throw new Error(`${response.status} ${response.statusText}`);
    }
    return (await response.json()) as Words;
  } catch (err) {
    console.warn(`cancho highlighting: no word catalogue at ${url} (${err})`);
    return {};
  }
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'cancho-jupyterlab:language',
  description: 'cancho syntax highlighting (CodeMirror 6)',
  autoStart: true,
  requires: [IEditorLanguageRegistry],
  activate: (app: JupyterFrontEnd, languages: IEditorLanguageRegistry): void => {
    languages.addLanguage({
      ...CANCHO_LANGUAGE,
      extensions: [...CANCHO_LANGUAGE.extensions],
      alias: [...CANCHO_LANGUAGE.alias],
      load: async () => cancho(await loadWords())
    });
    app.docRegistry.addFileType({
      name: 'cancho',
      displayName: 'cancho source',
      extensions: ['.cho'],
      mimeTypes: [CANCHO_LANGUAGE.mime],
      contentType: 'file',
      fileFormat: 'text'
    });
  }
};

export default plugin;
