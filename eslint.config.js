import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.tributary/**', 'coverage/**', 'dist/**', 'packages/client/dist/**', 'packages/client/src/schema.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read settings through src/config.ts.' }],
    },
  },
  { files: ['src/config.ts', 'test/**', 'bench/**', 'scripts/**'], rules: { 'no-restricted-properties': 'off' } },
);
