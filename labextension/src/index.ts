/**
 * The JupyterLab plugin: registers the cancho language with the editor language registry, so
 * notebooks whose kernel reports `codemirror_mode: "cancho"` (or mimetype `text/x-cancho`) and
 * `.cho` files in the editor are highlighted.
 */

import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';

import { cancho } from './cancho';

/** The language registration, exported for tests and for other extensions. */
export const CANCHO_LANGUAGE = {
  name: 'cancho',
  displayName: 'cancho',
  mime: 'text/x-cancho',
  extensions: ['cho'],
  alias: ['cho']
} as const;

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
      load: async () => cancho()
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
