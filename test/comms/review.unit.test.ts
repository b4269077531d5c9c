import { expect } from 'chai';
import { mergeValues } from '../../domain/comms/campaigns';
import { renderTemplate } from '../../domain/templates/templates';

/** Bugs found in the review of the communications features (each test failed before its fix). */
describe('communications review (unit)', () => {
  it('a merge tag named like an Object.prototype member renders empty (it threw in the HTML part and leaked "function Object()" elsewhere)', () => {
    const values = mergeValues({ name: 'Ann', fields: { plan: 'pro' } }, 'Acme', 'https://u.test/u/x');
    const content = {
      subject: 'Hi {{constructor}}{{toString}}',
      body_html: '<p>{{constructor}}|{{__proto__}}|{{hasOwnProperty}}|{{plan}}</p>',
      body_text: '{{valueOf}}|{{__proto__}}|{{name}}',
    };
    let rendered: ReturnType<typeof renderTemplate> | null = null;
    expect(() => { rendered = renderTemplate(content, values); }).not.to.throw();
    expect(rendered).to.deep.equal({ subject: 'Hi ', body_html: '<p>|||pro</p>', body_text: '||Ann' });
  });
});
